package nldev_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"golang.org/x/sys/unix"
)

// TestDeleteHardwareDevice: the kernel answers DELLINK of a device that no
// link add made (a hardware HCA) with EINVAL. The e2e guest has only rxe
// devices, so the message is proven here, on the kernel's recorded EINVAL
// reply.
func TestDeleteHardwareDevice(t *testing.T) {
	k := nlfixture.NewKernel(filepath.Join(recorded("6.12"), "nl")).Standard().
		On(nlfixture.Request{Cmd: nldev.CmdDelLink, Dev: 0, Port: -1}, "get_doit_bad_index.bin")
	err := client(t, k).DeleteLink("rxe0")
	want := "link delete rxe0: rxe0 is not a software link (only devices made by link add, such as rxe and siw, can be deleted)"
	if !errors.Is(err, unix.EINVAL) || err.Error() != want {
		t.Fatalf("DeleteLink = %v\nwant %s", err, want)
	}
}
