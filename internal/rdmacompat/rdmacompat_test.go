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
	if err != nil || !strings.Contains(d, `- [0].ifname = "rxe0"`) || !strings.Contains(d, `+ [0].ifname = "rxe0"`) {
		t.Fatalf("key order change not shown:\n%s", d)
	}
	renamed := `[{"ifindex":0,"ifname":"rxe0","nodetype":"ca"}]`
	d, _ = DiffJSON([]byte(rdma), []byte(renamed), Version{6, 1})
	if !strings.Contains(d, `- [0].node_type = "ca"`) || !strings.Contains(d, `+ [0].nodetype = "ca"`) {
		t.Fatalf("renamed key not shown:\n%s", d)
	}
}
