// Package proc reads what grdma needs from /proc about processes, apart
// from the sysfs reader: the command name rdma shows for the owner of an
// RDMA resource.
package proc

import (
	"io/fs"
	"strconv"
	"strings"
)

// maxCachedNames bounds CommNames' cache; past it the cache starts over.
const maxCachedNames = 4096

// CommNames returns a reader of /proc/PID/comm in fsys (a file system
// rooted at "/", such as os.DirFS("/") or a sysfs.FS, whose root may hold
// a captured tree). It caches every answer, a failed one too: the objects
// of one process share a name, and a listing may hold thousands of them.
// ok is false for PID 0 and for a process that is gone or unreadable.
// The function suits nldev.CommFunc; it is not safe for concurrent use.
func CommNames(fsys fs.FS) func(pid uint32) (name string, ok bool) {
	type entry struct {
		name string
		ok   bool
	}
	cache := map[uint32]entry{}
	return func(pid uint32) (string, bool) {
		if e, hit := cache[pid]; hit {
			return e.name, e.ok
		}
		var e entry
		if pid != 0 {
			if b, err := fs.ReadFile(fsys, "proc/"+strconv.FormatUint(uint64(pid), 10)+"/comm"); err == nil {
				e.name, e.ok = strings.TrimSuffix(string(b), "\n"), true
			}
		}
		if len(cache) >= maxCachedNames {
			clear(cache)
		}
		cache[pid] = e
		return e.name, e.ok
	}
}
