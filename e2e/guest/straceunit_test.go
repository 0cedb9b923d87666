//go:build e2eguest

package guest

import "testing"

// TestJoinResumed: split calls are joined where they began, other lines
// kept in order (pure: it also runs on the host with `go test -tags
// e2eguest -run JoinResumed`).
func TestJoinResumed(t *testing.T) {
	in := `7650  openat(3, ".rdma.prom.tmp2zo", O_WRONLY|O_CREAT|O_EXCL, 0600) = 6
7654  fsync(6)                          = 0
7650  fsync(3 <unfinished ...>
7654  --- SIGURG {si_signo=SIGURG, si_code=SI_TKILL, si_pid=7650, si_uid=0} ---
7651  renameat(3, "a", 3, "b" <unfinished ...>
7650  <... fsync resumed>)              = 0
7651  <... renameat resumed>)           = 0
7652  <... read resumed>)               = 1
7650  +++ exited with 0 +++`
	want := `7650  openat(3, ".rdma.prom.tmp2zo", O_WRONLY|O_CREAT|O_EXCL, 0600) = 6
7654  fsync(6)                          = 0
7650  fsync(3)              = 0
7654  --- SIGURG {si_signo=SIGURG, si_code=SI_TKILL, si_pid=7650, si_uid=0} ---
7651  renameat(3, "a", 3, "b")           = 0
7652  <... read resumed>)               = 1
7650  +++ exited with 0 +++`
	if got := joinResumed(in); got != want {
		t.Errorf("joinResumed:\n%s\nwant\n%s", got, want)
	}
}
