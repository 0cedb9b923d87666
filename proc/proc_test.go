package proc_test

import (
	"fmt"
	"testing"
	"testing/fstest"

	"github.com/grdma/grdma/proc"
)

func TestCommNames(t *testing.T) {
	fsys := fstest.MapFS{
		"proc/42/comm": {Data: []byte("ib_write_bw\n")},
		"proc/43/comm": {Data: []byte("no-newline")},
		"proc/0/comm":  {Data: []byte("swapper\n")},
	}
	comm := proc.CommNames(fsys)
	for pid, want := range map[uint32]struct {
		name string
		ok   bool
	}{42: {"ib_write_bw", true}, 43: {"no-newline", true}, 44: {"", false}, 0: {"", false}} {
		if name, ok := comm(pid); name != want.name || ok != want.ok {
			t.Errorf("comm(%d) = %q, %v; want %q, %v", pid, name, ok, want.name, want.ok)
		}
	}
	// Answers are cached: a process that ends keeps its name in this listing.
	delete(fsys, "proc/42/comm")
	if name, ok := comm(42); name != "ib_write_bw" || !ok {
		t.Errorf("cached comm(42) = %q, %v", name, ok)
	}
}

func ExampleCommNames() {
	comm := proc.CommNames(fstest.MapFS{"proc/7/comm": {Data: []byte("rping\n")}})
	fmt.Println(comm(7))
	fmt.Println(comm(8))
	// Output:
	// rping true
	//  false
}
