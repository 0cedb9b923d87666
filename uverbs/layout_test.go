package uverbs

import (
	"testing"

	"github.com/grdma/grdma/internal/cheader"
)

// ibUserVerbsHeader is the kernel UAPI header the structs mirror
// (linux-libc-dev, or rdma-core's kernel-headers).
const ibUserVerbsHeader = "/usr/include/rdma/ib_user_verbs.h"

// layouts pairs every Go ABI struct with its C struct.
var layouts = []struct {
	goValue any
	cName   string
}{
	{cmdHdr{}, "ib_uverbs_cmd_hdr"},
	{getContextReq{}, "ib_uverbs_get_context"},
	{getContextResp{}, "ib_uverbs_get_context_resp"},
	{queryDeviceReq{}, "ib_uverbs_query_device"},
	{DeviceAttr{}, "ib_uverbs_query_device_resp"},
	{queryPortReq{}, "ib_uverbs_query_port"},
	{PortAttr{}, "ib_uverbs_query_port_resp"},
}

// TestLayoutMatchesHeader checks that each Go struct encodes to exactly the
// C struct's layout: same size, and the same fields at the same offsets
// with the same sizes. Flexible driver_data[] members take no room in the
// struct and have no Go field.
func TestLayoutMatchesHeader(t *testing.T) {
	h, _, err := cheader.Read(ibUserVerbsHeader)
	if err != nil {
		noHeader(t, err)
	}
	for _, l := range layouts {
		t.Run(l.cName, func(t *testing.T) {
			c, err := h.Layout(l.cName)
			if err != nil {
				t.Fatalf("%s: %v", ibUserVerbsHeader, err)
			}
			for _, d := range cheader.Compare(l.goValue, c, nil) {
				t.Error(d)
			}
		})
	}
}

// noHeader skips a test that needs a kernel UAPI header the machine lacks
// (make test installs nothing), or fails it where CI requires the headers
// (GRDMA_UAPI_HEADERS=required, set by .ci/run after installing them).
func noHeader(t *testing.T, err error) {
	t.Helper()
	cheader.Missing(t, "uverbs", err)
}
