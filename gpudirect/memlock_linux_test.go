package gpudirect_test

import (
	"testing"
	"testing/fstest"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/gpudirect"
)

func TestMemlockDefaultsToGetrlimit(t *testing.T) {
	var limit unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &limit); err != nil {
		t.Fatal(err)
	}
	want := limit.Cur
	if want == unix.RLIM_INFINITY {
		want = gpudirect.MemlockUnlimited
	}
	memory := gpudirect.Check(fstest.MapFS{}, gpudirect.Options{}).Memory
	if memory.Memlock == nil || memory.Memlock.LimitBytes != want {
		t.Fatalf("memlock = %+v, want limit %d", memory.Memlock, want)
	}
	if s := findSignal(t, memory.Signals, "memlock"); s.Source != "getrlimit(RLIMIT_MEMLOCK) of this process" {
		t.Errorf("memlock source = %q", s.Source)
	}
}
