package rdmacm

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/grdma/grdma/internal/cheader"
)

// The UAPI headers the structs mirror (linux-libc-dev): rdma_user_cm.h
// and the two it takes structs from.
var cmHeaders = []string{"/usr/include/rdma/ib_user_verbs.h", "/usr/include/rdma/ib_user_sa.h", "/usr/include/rdma/rdma_user_cm.h"}

// readHeaders parses the headers, skipping the test when they are not
// installed.
func readHeaders(t *testing.T) (*cheader.Header, string) {
	t.Helper()
	h, src, err := cheader.Read(cmHeaders...)
	if err != nil {
		cheader.Missing(t, "rdmacm", err)
	}
	return h, src
}

// ahMembers maps ahAttr's inlined struct ib_uverbs_global_route.
var ahMembers = map[string]string{
	"DGID": "grh.dgid", "FlowLabel": "grh.flow_label", "SGIDIndex": "grh.sgid_index",
	"HopLimit": "grh.hop_limit", "TrafficClass": "grh.traffic_class", "GRHReserved": "grh.reserved",
}

// layouts pairs every Go ABI struct with its C struct.
var layouts = []struct {
	goValue any
	cName   string
	members map[string]string
}{
	{cmdHdr{}, "rdma_ucm_cmd_hdr", nil},
	{createIDReq{}, "rdma_ucm_create_id", nil},
	{createIDResp{}, "rdma_ucm_create_id_resp", nil},
	{destroyIDReq{}, "rdma_ucm_destroy_id", nil},
	{destroyIDResp{}, "rdma_ucm_destroy_id_resp", nil},
	{bindReq{}, "rdma_ucm_bind", nil},
	{resolveAddrReq{}, "rdma_ucm_resolve_addr", nil},
	{resolveRouteReq{}, "rdma_ucm_resolve_route", nil},
	{queryReq{}, "rdma_ucm_query", nil},
	{queryAddrResp{}, "rdma_ucm_query_addr_resp", nil},
	{userPathRec{}, "ib_user_path_rec", nil},
	{queryRouteResp{}, "rdma_ucm_query_route_resp", nil},
	{connParam{}, "rdma_ucm_conn_param", nil},
	{ahAttr{}, "ib_uverbs_ah_attr", ahMembers},
	{udParam{}, "rdma_ucm_ud_param", nil},
	{ece{}, "rdma_ucm_ece", nil},
	{connectReq{}, "rdma_ucm_connect", nil},
	{listenReq{}, "rdma_ucm_listen", nil},
	{acceptReq{}, "rdma_ucm_accept", nil},
	{rejectReq{}, "rdma_ucm_reject", nil},
	{disconnectReq{}, "rdma_ucm_disconnect", nil},
	{initQPAttrReq{}, "rdma_ucm_init_qp_attr", nil},
	{qpAttr{}, "ib_uverbs_qp_attr", nil},
	{notifyReq{}, "rdma_ucm_notify", nil},
	{getEventReq{}, "rdma_ucm_get_event", nil},
	{eventResp{}, "rdma_ucm_event_resp", nil},
	{setOptionReq{}, "rdma_ucm_set_option", nil},
}

// TestLayoutMatchesHeader checks every size and offset of the structs
// written to and read from the kernel against rdma_user_cm.h.
func TestLayoutMatchesHeader(t *testing.T) {
	h, _ := readHeaders(t)
	for _, l := range layouts {
		t.Run(l.cName, func(t *testing.T) {
			c, err := h.Layout(l.cName)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range cheader.Compare(l.goValue, c, l.members) {
				t.Error(d)
			}
		})
	}
	// The union param of the event is as large as its larger member.
	ev, _ := h.Layout("rdma_ucm_event_resp")
	ud, _ := h.Layout("rdma_ucm_ud_param")
	if p := ev.Paths()["param"]; p.Size != ud.Size || p.Size != len(eventResp{}.Param) {
		t.Errorf("event param %d bytes, ud_param %d, Go %d", p.Size, ud.Size, len(eventResp{}.Param))
	}
}

// TestNumbersMatchHeader checks the command, option, query, port space
// and ABI numbers against the header's enums.
func TestNumbersMatchHeader(t *testing.T) {
	_, src := readHeaders(t)
	enum := cheader.EnumValues(src)
	for number, name := range commandNames {
		if got, ok := enum["RDMA_USER_CM_CMD_"+name]; !ok || got != int(number) {
			t.Errorf("%s is %d; the header has %d (found %v)", name, number, got, ok)
		}
	}
	for name, v := range map[string]int{
		"RDMA_USER_CM_QUERY_ADDR": queryAddr, "RDMA_USER_CM_QUERY_PATH": queryPath, "RDMA_USER_CM_QUERY_GID": queryGID,
		"RDMA_OPTION_ID": optionLevelID, "RDMA_OPTION_ID_TOS": optionTOS, "RDMA_OPTION_ID_REUSEADDR": optionReuseAddr,
		"RDMA_OPTION_ID_AFONLY": optionAFOnly, "RDMA_OPTION_ID_ACK_TIMEOUT": optionAckTimeout,
		"RDMA_PS_TCP": int(PortSpaceTCP), "RDMA_PS_UDP": int(PortSpaceUDP), "RDMA_PS_IB": int(PortSpaceIB),
		"RDMA_PS_IPOIB": int(PortSpaceIPoIB),
	} {
		if got, ok := enum[name]; !ok || got != v {
			t.Errorf("%s is %d; the header has %d (found %v)", name, v, got, ok)
		}
	}
	if !regexpABI.MatchString(src) {
		t.Errorf("the header does not define RDMA_USER_CM_ABI_VERSION %d", ABIVersion)
	}
}

var regexpABI = regexp.MustCompile(`#define\s+RDMA_USER_CM_ABI_VERSION\s+` + strconv.Itoa(ABIVersion) + `\b`)
