package rdmacompat

import (
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]Version{
		"rdma utility, iproute2-6.1.0":      {6, 1},
		"rdma utility, iproute2-6.15.0":     {6, 15},
		"rdma utility, iproute2-v7.1.0-55g": {7, 1},
	} {
		if got, err := ParseVersion(in); err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseVersion("ip utility"); err == nil {
		t.Error("no error for a line without a version")
	}
}

func TestNormalizeDropsOnlyNewerFields(t *testing.T) {
	grdma := "0: rxe0: node_type ca protocol roce node_guid 1 \n"
	if got := NormalizeText(grdma, Version{6, 1}); got != "0: rxe0: node_type ca node_guid 1 \n" {
		t.Errorf("for 6.1: %q", got)
	}
	if got := NormalizeText(grdma, Version{6, 5}); got != grdma {
		t.Errorf("for 6.5: %q", got)
	}
	sys := "netns shared privileged-qkey off monitor on copy-on-fork on\n"
	if got := NormalizeText(sys, Version{6, 1}); got != "netns shared copy-on-fork on\n" {
		t.Errorf("sys for 6.1: %q", got)
	}
}

func TestDiffJSONSeesKeyOrderAndValues(t *testing.T) {
	rdma := `[{"ifindex":0,"ifname":"rxe0","node_type":"ca"}]`
	same := "[{\"ifindex\":0,\"ifname\":\"rxe0\",\"node_type\":\"ca\",\"protocol\":\"roce\"}\n]\n"
	if d, err := DiffJSON([]byte(rdma), []byte(same), Version{6, 1}); err != nil || d != "" {
		t.Fatalf("equal outputs differ: %v\n%s", err, d)
	}
	swapped := `[{"ifname":"rxe0","ifindex":0,"node_type":"ca"}]`
	d, err := DiffJSON([]byte(rdma), []byte(swapped), Version{6, 1})
	// Either key may be shown as the one that moved.
	moved := strings.Contains(d, "- [0].ifindex = 0") && strings.Contains(d, "+ [0].ifindex = 0") ||
		strings.Contains(d, `- [0].ifname = "rxe0"`) && strings.Contains(d, `+ [0].ifname = "rxe0"`)
	if err != nil || !moved {
		t.Fatalf("key order change not shown:\n%s", d)
	}
	renamed := `[{"ifindex":0,"ifname":"rxe0","nodetype":"ca"}]`
	d, _ = DiffJSON([]byte(rdma), []byte(renamed), Version{6, 1})
	if !strings.Contains(d, `- [0].node_type = "ca"`) || !strings.Contains(d, `+ [0].nodetype = "ca"`) {
		t.Fatalf("renamed key not shown:\n%s", d)
	}
}

// rdma 6.1 printed an SRQ's comm from a dead buffer ("comm 18-33"): the
// field is left out of the comparison there, and only there.
func TestGarbledFieldsAreNotCompared(t *testing.T) {
	rdma := "dev rxe1 cqn 2 pid 275 comm ibv_srq_pingpon \ndev rxe1 srqn 0 type BASIC lqpn 18-33 pid 275 comm 18-33 \n"
	grdma := "dev rxe1 cqn 2 pid 275 comm ibv_srq_pingpon \ndev rxe1 srqn 0 type BASIC lqpn 18-33 pid 275 comm ibv_srq_pingpon \n"
	if d := DiffText(rdma, grdma, Version{6, 1}); d != "" {
		t.Errorf("6.1: garbled SRQ comm compared:\n%s", d)
	}
	if d := DiffText(rdma, grdma, Version{6, 7}); !strings.Contains(d, "- dev rxe1 srqn 0") {
		t.Errorf("6.7: SRQ comm not compared:\n%s", d)
	}
	other := strings.Replace(grdma, "cqn 2 pid 275 comm ibv_srq_pingpon", "cqn 2 pid 275 comm other", 1)
	if d := DiffText(rdma, other, Version{6, 1}); !strings.Contains(d, "+ dev rxe1 cqn 2") {
		t.Errorf("6.1: CQ comm not compared:\n%s", d)
	}
	rj := `[{"ifindex":1,"srqn":0,"pid":275,"comm":"18-33"},{"ifindex":1,"cqn":2,"comm":"x"}]`
	gj := `[{"ifindex":1,"srqn":0,"pid":275,"comm":"ibv_srq_pingpon"},{"ifindex":1,"cqn":2,"comm":"y"}]`
	d, err := DiffJSON([]byte(rj), []byte(gj), Version{6, 1})
	if err != nil || strings.Contains(d, "[0].comm") || !strings.Contains(d, `+ [1].comm = "y"`) {
		t.Errorf("JSON: %v\n%s", err, d)
	}
}
