package uverbs

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/grdma/grdma/internal/cheader"
)

// The UAPI headers the probe's structs mirror (linux-libc-dev).
const (
	rxeHeader  = "/usr/include/rdma/rdma_user_rxe.h"
	mlx5Header = "/usr/include/rdma/mlx5-abi.h"
	// ioctlVerbsHeader holds the ioctl ABI's structs.
	ioctlVerbsHeader = ibUserVerbsHeader + "+/usr/include/rdma/ib_user_ioctl_verbs.h"
)

// objectLayouts pairs the Go structs of the probe's commands and driver
// data with their C structs. members maps a Go field to the path of its
// C member when the names differ or the member is inside a union; "" marks
// a Go field that covers the rest of a union.
var objectLayouts = []struct {
	header  string
	goValue any
	cName   string
	members map[string]string
}{
	{ibUserVerbsHeader, allocPDReq{}, "ib_uverbs_alloc_pd", nil},
	{ibUserVerbsHeader, allocPDResp{}, "ib_uverbs_alloc_pd_resp", nil},
	{ibUserVerbsHeader, deallocPDReq{}, "ib_uverbs_dealloc_pd", nil},
	{ibUserVerbsHeader, regMRReq{}, "ib_uverbs_reg_mr", nil},
	{ibUserVerbsHeader, regMRResp{}, "ib_uverbs_reg_mr_resp", nil},
	{ibUserVerbsHeader, deregMRReq{}, "ib_uverbs_dereg_mr", nil},
	{ibUserVerbsHeader, createCQReq{}, "ib_uverbs_create_cq", nil},
	{ibUserVerbsHeader, createCQResp{}, "ib_uverbs_create_cq_resp", nil},
	{ibUserVerbsHeader, destroyCQReq{}, "ib_uverbs_destroy_cq", nil},
	{ibUserVerbsHeader, destroyCQResp{}, "ib_uverbs_destroy_cq_resp", nil},
	{ibUserVerbsHeader, createCompChannelReq{}, "ib_uverbs_create_comp_channel", nil},
	{ibUserVerbsHeader, createCompChannelResp{}, "ib_uverbs_create_comp_channel_resp", nil},
	{ibUserVerbsHeader, reqNotifyCQReq{}, "ib_uverbs_req_notify_cq", nil},
	{ibUserVerbsHeader, compEventDesc{}, "ib_uverbs_comp_event_desc", nil},
	{ibUserVerbsHeader, WC{}, "ib_uverbs_wc", nil},
	{ibUserVerbsHeader, createQPReq{}, "ib_uverbs_create_qp", nil},
	{ibUserVerbsHeader, createQPResp{}, "ib_uverbs_create_qp_resp", nil},
	{ibUserVerbsHeader, AddressVector{}, "ib_uverbs_qp_dest", nil},
	{ibUserVerbsHeader, modifyQPReq{}, "ib_uverbs_modify_qp", nil},
	{ibUserVerbsHeader, queryQPReq{}, "ib_uverbs_query_qp", nil},
	{ibUserVerbsHeader, queryQPResp{}, "ib_uverbs_query_qp_resp", nil},
	{ibUserVerbsHeader, destroyQPReq{}, "ib_uverbs_destroy_qp", nil},
	{ibUserVerbsHeader, destroyQPResp{}, "ib_uverbs_destroy_qp_resp", nil},
	{ibUserVerbsHeader, postSendReq{}, "ib_uverbs_post_send", nil},
	{ibUserVerbsHeader, postSendResp{}, "ib_uverbs_post_send_resp", nil},
	{ibUserVerbsHeader, SGE{}, "ib_uverbs_sge", nil},
	{ioctlVerbsHeader, PortAttrEx{}, "ib_uverbs_query_port_resp_ex", map[string]string{
		"PortAttr": "legacy_resp", "Reserved": "", "ActiveSpeedEx": "", // reserved[6] before Linux 6.8
	}},
	{ibUserVerbsHeader, exCmdHdr{}, "ib_uverbs_ex_cmd_hdr", nil},
	{ibUserVerbsHeader, exQueryDeviceReq{}, "ib_uverbs_ex_query_device", nil},
	{ibUserVerbsHeader, DeviceAttrEx{}, "ib_uverbs_ex_query_device_resp", nil},
	{ibUserVerbsHeader, ODPCaps{}, "ib_uverbs_odp_caps", nil},
	{ibUserVerbsHeader, RSSCaps{}, "ib_uverbs_rss_caps", nil},
	{ibUserVerbsHeader, TMCaps{}, "ib_uverbs_tm_caps", nil},
	{ibUserVerbsHeader, CQModerationCaps{}, "ib_uverbs_cq_moderation_caps", nil},

	{rxeHeader, mmapInfo{}, "mminfo", nil},
	{rxeHeader, rxeCreateCQResp{}, "rxe_create_cq_resp", nil},
	{rxeHeader, rxeCreateQPResp{}, "rxe_create_qp_resp", nil},
	{rxeHeader, rxeQueueBuf{}, "rxe_queue_buf", nil},
	{rxeHeader, SGE{}, "rxe_sge", nil},
	{rxeHeader, rxeSendWR{}, "rxe_send_wr", map[string]string{
		"RemoteAddr": "wr.rdma.remote_addr", "RKey": "wr.rdma.rkey", "RDMAReserved": "wr.rdma.reserved", "UnionRest": "",
	}},
	{rxeHeader, rxeDMAInfo{}, "rxe_dma_info", nil},
	{rxeHeader, rxeSendWQE{}, "rxe_send_wqe", nil},
	{rxeHeader, rxeRecvWQE{}, "rxe_recv_wqe", nil},

	{mlx5Header, mlx5AllocUcontextReq{}, "mlx5_ib_alloc_ucontext_req", nil},
	{mlx5Header, mlx5AllocUcontextResp{}, "mlx5_ib_alloc_ucontext_resp", nil},
	{mlx5Header, mlx5CreateCQ{}, "mlx5_ib_create_cq", nil},
	{mlx5Header, mlx5CreateCQResp{}, "mlx5_ib_create_cq_resp", nil},
	{mlx5Header, mlx5CreateQP{}, "mlx5_ib_create_qp", nil},
	{mlx5Header, mlx5CreateQPResp{}, "mlx5_ib_create_qp_resp", nil},
	{mlx5Header, mlx5QueryDeviceResp{}, "mlx5_ib_query_device_resp", nil},
}

// readHeader parses a UAPI header, or several joined by "+" (a header and
// the one it includes), skipping the test when one is absent (noHeader).
func readHeader(t *testing.T, path string) (*cheader.Header, string) {
	t.Helper()
	h, src, err := cheader.Read(strings.Split(path, "+")...)
	if err != nil {
		noHeader(t, err)
	}
	return h, src
}

// TestObjectLayoutsMatchHeaders checks every size and offset of the
// structs written to and read from the kernel, and shared with it in rxe's
// queues, against the C headers: each Go field at its C member's offset
// with its size, the Go struct as large as the C one, and no padding in
// the Go struct (so its memory layout is its encoding).
func TestObjectLayoutsMatchHeaders(t *testing.T) {
	headers := map[string]*cheader.Header{}
	for _, l := range objectLayouts {
		t.Run(l.cName, func(t *testing.T) {
			h := headers[l.header]
			if h == nil {
				h, _ = readHeader(t, l.header)
				headers[l.header] = h
			}
			c, err := h.Layout(l.cName)
			if err != nil {
				t.Fatalf("%s: %v", l.header, err)
			}
			for _, d := range cheader.Compare(l.goValue, c, l.members) {
				t.Error(d)
			}
		})
	}
}

// TestRxeQueueOffsets checks the ring offsets rxe.go uses, which the
// kernel and librxe hard-wire, against the header.
func TestRxeQueueOffsets(t *testing.T) {
	h, _ := readHeader(t, rxeHeader)
	paths := h.Types["rxe_queue_buf"].Paths()
	for name, got := range map[string]uintptr{
		"producer_index": rxeProducerOffset, "consumer_index": rxeConsumerOffset, "data": rxeDataOffset,
	} {
		if want := paths[name].Offset; int(got) != want {
			t.Errorf("%s at %d, C %d", name, got, want)
		}
	}
	// The WQEs' SGE arrays start right after their headers.
	for cName, goSize := range map[string]uintptr{
		"rxe_send_wqe": unsafe.Sizeof(rxeSendWQE{}), "rxe_recv_wqe": unsafe.Sizeof(rxeRecvWQE{}),
	} {
		if sge := h.Types[cName].Paths()["dma.sge"]; !sge.Flexible || sge.Offset != int(goSize) {
			t.Errorf("%s: SGEs at %d (flexible %v), Go header %d bytes", cName, sge.Offset, sge.Flexible, goSize)
		}
	}
}

// TestCommandNumbersMatchHeader checks the command numbers against enum
// ib_uverbs_write_cmds.
func TestCommandNumbersMatchHeader(t *testing.T) {
	_, src := readHeader(t, ibUserVerbsHeader)
	enum := cheader.EnumValues(src)
	for number, name := range commandNames {
		if got, ok := enum["IB_USER_VERBS_CMD_"+name]; !ok || got != int(number) {
			t.Errorf("%s is %d; the header has %d (found %v)", name, number, got, ok)
		}
	}
}
