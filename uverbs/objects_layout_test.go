package uverbs

import (
	"encoding/binary"
	"os"
	"reflect"
	"strings"
	"testing"
	"unsafe"
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
func readHeader(t *testing.T, path string) (*cHeader, string) {
	t.Helper()
	var src []byte
	for _, p := range strings.Split(path, "+") {
		b, err := os.ReadFile(p)
		if err != nil {
			noHeader(t, err)
		}
		src = append(append(src, b...), '\n')
	}
	h, err := parseCHeader(string(src))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return h, string(src)
}

// TestObjectLayoutsMatchHeaders checks every size and offset of the
// structs written to and read from the kernel, and shared with it in rxe's
// queues, against the C headers: each Go field at its C member's offset
// with its size, the Go struct as large as the C one, and no padding in
// the Go struct (so its memory layout is its encoding).
func TestObjectLayoutsMatchHeaders(t *testing.T) {
	headers := map[string]*cHeader{}
	for _, l := range objectLayouts {
		t.Run(l.cName, func(t *testing.T) {
			h := headers[l.header]
			if h == nil {
				h, _ = readHeader(t, l.header)
				headers[l.header] = h
			}
			c, err := h.layout(l.cName)
			if err != nil {
				t.Fatalf("%s: %v", l.header, err)
			}
			if got := binary.Size(l.goValue); got != c.size {
				t.Errorf("size %d, C %d", got, c.size)
			}
			if mem := reflect.TypeOf(l.goValue).Size(); int(mem) != binary.Size(l.goValue) {
				t.Errorf("Go struct has padding: %d bytes in memory, %d encoded", mem, binary.Size(l.goValue))
			}
			paths := c.paths()
			byName := map[string]string{}
			for _, name := range c.topLevel() {
				byName[normalize(name)] = name
			}
			for _, g := range encodedFields(l.goValue) {
				path, mapped := l.members[g.name]
				if !mapped {
					path = byName[normalize(g.name)]
				}
				if mapped && path == "" {
					if g.offset+g.size > c.size {
						t.Errorf("field %s @%d size %d runs past the C struct's %d bytes", g.name, g.offset, g.size, c.size)
					}
					continue
				}
				m, ok := paths[path]
				if !ok {
					t.Errorf("field %s: no C member %q", g.name, path)
					continue
				}
				if g.offset != m.offset || g.size != m.size {
					t.Errorf("field %s @%d size %d, C %s @%d size %d", g.name, g.offset, g.size, path, m.offset, m.size)
				}
			}
		})
	}
}

// TestRxeQueueOffsets checks the ring offsets rxe.go uses, which the
// kernel and librxe hard-wire, against the header.
func TestRxeQueueOffsets(t *testing.T) {
	h, _ := readHeader(t, rxeHeader)
	paths := h.types["rxe_queue_buf"].paths()
	for name, got := range map[string]uintptr{
		"producer_index": rxeProducerOffset, "consumer_index": rxeConsumerOffset, "data": rxeDataOffset,
	} {
		if want := paths[name].offset; int(got) != want {
			t.Errorf("%s at %d, C %d", name, got, want)
		}
	}
	// The WQEs' SGE arrays start right after their headers.
	for cName, goSize := range map[string]uintptr{
		"rxe_send_wqe": unsafe.Sizeof(rxeSendWQE{}), "rxe_recv_wqe": unsafe.Sizeof(rxeRecvWQE{}),
	} {
		if sge := h.types[cName].paths()["dma.sge"]; !sge.flexible || sge.offset != int(goSize) {
			t.Errorf("%s: SGEs at %d (flexible %v), Go header %d bytes", cName, sge.offset, sge.flexible, goSize)
		}
	}
}

// TestCommandNumbersMatchHeader checks the command numbers against enum
// ib_uverbs_write_cmds.
func TestCommandNumbersMatchHeader(t *testing.T) {
	_, src := readHeader(t, ibUserVerbsHeader)
	enum := enumValues(src)
	for number, name := range commandNames {
		if got, ok := enum["IB_USER_VERBS_CMD_"+name]; !ok || got != int(number) {
			t.Errorf("%s is %d; the header has %d (found %v)", name, number, got, ok)
		}
	}
}

// TestCHeaderParser checks the layout engine on layouts known by heart,
// so that an engine bug cannot make the layout tests pass.
func TestCHeaderParser(t *testing.T) {
	h, err := parseCHeader(`
struct macro { RDMA_UAPI_PTR(void *, p); };
#define X 1
struct in { __u8 a; __aligned_u64 b; };                       /* 16 */
union u { __u32 w; struct { __u8 lo; __u16 hi; } parts; };    /* 4 */
struct s {
	__u32 x;
	union { __be32 imm; __u32 rkey; } ex;
	union {
		struct { __aligned_u64 addr; __u32 key; } rdma;
		struct { __u16 p[10]; } big;
	} wr;
	struct in inner;
	union { __u64 q; __u8 c; };
	__u16 pair[2], single;
	union { __DECLARE_FLEX_ARRAY(__u8, raw); __DECLARE_FLEX_ARRAY(struct in, ins); };
};
struct f { __u32 n; __aligned_u64 d[0]; };
struct bad { struct nosuch x; };
`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ size, align int }{"in": {16, 8}, "u": {4, 4}, "s": {64, 8}, "f": {8, 8}}
	for name, w := range want {
		if c := h.types[name]; c == nil || c.size != w.size || c.align != w.align {
			t.Errorf("%s = %+v, want size %d align %d", name, c, w.size, w.align)
		}
	}
	paths := h.types["s"].paths()
	for path, w := range map[string]cPath{
		"x": {0, 4, false}, "ex": {4, 4, false}, "ex.rkey": {4, 4, false}, "wr": {8, 24, false},
		"wr.rdma.addr": {8, 8, false}, "wr.rdma.key": {16, 4, false}, "wr.big.p": {8, 20, false},
		"inner": {32, 16, false}, "inner.b": {40, 8, false}, "q": {48, 8, false}, "c": {48, 1, false},
		"pair": {56, 4, false}, "single": {60, 2, false}, "raw": {64, 0, true}, "ins": {64, 0, true},
	} {
		if got, ok := paths[path]; !ok || got != w {
			t.Errorf("s.%s = %+v (found %v), want %+v", path, got, ok, w)
		}
	}
	if got := h.types["s"].topLevel(); len(got) != 8 || got[4] != "q" || got[5] != "c" {
		t.Errorf("top-level members %v", got)
	}
	if f := h.types["f"].paths()["d"]; !f.flexible || f.offset != 8 {
		t.Errorf("f.d = %+v, want flexible at 8", f)
	}
	for _, tag := range []string{"macro", "bad", "missing"} {
		if _, err := h.layout(tag); err == nil {
			t.Errorf("struct %s was laid out; want an error", tag)
		}
	}
	values := enumValues("enum e { A, B, C = 10, D, E = (1 << 2), F };")
	if values["A"] != 0 || values["B"] != 1 || values["D"] != 11 {
		t.Errorf("enum values %v", values)
	}
	if _, ok := values["F"]; ok {
		t.Errorf("F follows an expression; want it left out: %v", values)
	}
}
