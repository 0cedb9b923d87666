package e2e

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
)

// cpioTree is an initramfs being assembled in memory and written as a
// "newc" cpio archive: no cpio binary, no root-owned staging directory.
type cpioTree struct {
	entries map[string]*cpioEntry
}

type cpioEntry struct {
	mode         uint32 // type and permission bits
	data         []byte // file contents or symlink target
	src          string // host file to copy when data is nil
	major, minor uint32 // for device nodes
}

const (
	sIFDIR = 0o040000
	sIFREG = 0o100000
	sIFLNK = 0o120000
	sIFCHR = 0o020000
)

func newCpioTree() *cpioTree { return &cpioTree{entries: map[string]*cpioEntry{}} }

func clean(guest string) string { return strings.TrimPrefix(path.Clean("/"+guest), "/") }

func (t *cpioTree) has(guest string) bool { return t.entries[clean(guest)] != nil }

// dir adds a directory and its parents.
func (t *cpioTree) dir(guest string) {
	p := clean(guest)
	for p != "" && p != "." {
		if t.entries[p] == nil {
			t.entries[p] = &cpioEntry{mode: sIFDIR | 0o755}
		}
		p = path.Dir(p)
		if p == "." {
			break
		}
	}
}

// file adds a file with the given contents.
func (t *cpioTree) file(guest string, perm uint32, data []byte) {
	t.dir(path.Dir(clean(guest)))
	if data == nil {
		data = []byte{}
	}
	t.entries[clean(guest)] = &cpioEntry{mode: sIFREG | perm, data: data}
}

// copy adds a host file (following symlinks), keeping its permissions.
func (t *cpioTree) copy(guest, host string) error {
	st, err := os.Stat(host)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("e2e: %s is not a regular file", host)
	}
	t.dir(path.Dir(clean(guest)))
	t.entries[clean(guest)] = &cpioEntry{mode: sIFREG | uint32(st.Mode().Perm()), src: host}
	return nil
}

func (t *cpioTree) symlink(guest, target string) {
	t.dir(path.Dir(clean(guest)))
	t.entries[clean(guest)] = &cpioEntry{mode: sIFLNK | 0o777, data: []byte(target)}
}

func (t *cpioTree) chardev(guest string, perm, major, minor uint32) {
	t.dir(path.Dir(clean(guest)))
	t.entries[clean(guest)] = &cpioEntry{mode: sIFCHR | perm, major: major, minor: minor}
}

// writeTo writes the archive; sorted names put every directory before
// what it holds.
func (t *cpioTree) writeTo(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	names := make([]string, 0, len(t.entries))
	for n := range t.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	ino := uint32(1)
	for _, n := range names {
		e := t.entries[n]
		data := e.data
		if e.src != "" {
			b, err := os.ReadFile(e.src)
			if err != nil {
				return err
			}
			data = b
		}
		if err := writeCpio(bw, n, ino, e.mode, e.major, e.minor, data); err != nil {
			return err
		}
		ino++
	}
	if err := writeCpio(bw, "TRAILER!!!", 0, 0, 0, 0, nil); err != nil {
		return err
	}
	return bw.Flush()
}

func writeCpio(w *bufio.Writer, name string, ino, mode, major, minor uint32, data []byte) error {
	nlink := 1
	if mode&0o170000 == sIFDIR {
		nlink = 2
	}
	// magic ino mode uid gid nlink mtime filesize devmajor devminor rdevmajor rdevminor namesize check
	fmt.Fprintf(w, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, mode, 0, 0, nlink, 0, len(data), 0, 0, major, minor, len(name)+1, 0)
	w.WriteString(name)
	w.WriteByte(0)
	pad(w, 110+len(name)+1)
	w.Write(data)
	pad(w, len(data))
	return nil
}

func pad(w *bufio.Writer, n int) {
	for ; n%4 != 0; n++ {
		w.WriteByte(0)
	}
}
