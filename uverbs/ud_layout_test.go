package uverbs

import (
	"testing"
	"unsafe"
)

// The UD structs: address handles (ib_user_verbs.h) and rxe's UD send
// work request and address vector (rdma_user_rxe.h), checked by
// TestObjectLayoutsMatchHeaders with the others.
func init() {
	objectLayouts = append(objectLayouts, []struct {
		header  string
		goValue any
		cName   string
		members map[string]string
	}{
		{ibUserVerbsHeader, GlobalRoute{}, "ib_uverbs_global_route", nil},
		{ibUserVerbsHeader, AHAttr{}, "ib_uverbs_ah_attr", nil},
		{ibUserVerbsHeader, createAHReq{}, "ib_uverbs_create_ah", nil},
		{ibUserVerbsHeader, createAHResp{}, "ib_uverbs_create_ah_resp", nil},
		{ibUserVerbsHeader, destroyAHReq{}, "ib_uverbs_destroy_ah", nil},
		{rxeHeader, rxeCreateAHResp{}, "rxe_create_ah_resp", nil},
		{rxeHeader, rxeGlobalRoute{}, "rxe_global_route", map[string]string{"Pad": ""}},
		{rxeHeader, rxeAV{}, "rxe_av", nil},
		{rxeHeader, rxeSendWRUD{}, "rxe_send_wr", map[string]string{
			"RemoteQPN": "wr.ud.remote_qpn", "RemoteQKey": "wr.ud.remote_qkey", "PKeyIndex": "wr.ud.pkey_index",
			"UDReserved": "wr.ud.reserved", "AHNum": "wr.ud.ah_num", "Pad": "wr.ud.pad", "AV": "wr.ud.av",
		}},
		{rxeHeader, rxeSendWQEUD{}, "rxe_send_wqe", nil},
	}...)
}

// TestRxeAVSockaddrs checks where gidToSockaddr writes the addresses:
// sin_addr of struct sockaddr_in, sin6_addr of struct sockaddr_in6, and
// that the vector's two unions are where rxe_av has them.
func TestRxeAVSockaddrs(t *testing.T) {
	h, _ := readHeader(t, rxeHeader)
	paths := h.Types["rxe_av"].Paths()
	for name, got := range map[string]uintptr{
		"sgid_addr": unsafe.Offsetof(rxeAV{}.SGIDAddr), "dgid_addr": unsafe.Offsetof(rxeAV{}.DGIDAddr),
	} {
		if p := paths[name]; p.Offset != int(got) || p.Size != 28 {
			t.Errorf("%s @%d size %d, Go @%d size 28", name, p.Offset, p.Size, got)
		}
	}
	var sa [28]byte
	gidToSockaddr(&sa, [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 1, 14: 2, 15: 3})
	if want := [28]byte{0: afInet, 4: 10, 5: 1, 6: 2, 7: 3}; sa != want {
		t.Errorf("IPv4 GID: % x, want % x", sa, want)
	}
	ll := [16]byte{0: 0xfe, 1: 0x80, 15: 1}
	gidToSockaddr(&sa, ll)
	if want := [28]byte{0: afInet6, 8: 0xfe, 9: 0x80, 23: 1}; sa != want {
		t.Errorf("IPv6 GID: % x, want % x", sa, want)
	}
	if unsafe.Sizeof(rxeSendWQEUD{}) != unsafe.Sizeof(rxeSendWQE{}) {
		t.Errorf("UD send WQE %d bytes, RC %d", unsafe.Sizeof(rxeSendWQEUD{}), unsafe.Sizeof(rxeSendWQE{}))
	}
}
