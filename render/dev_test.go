package render

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/output"
)

// TestEventRecorded renders the events the 6.12 kernel sent.
func TestEventRecorded(t *testing.T) {
	msgs, err := nlfixture.Load(filepath.Join("..", "testdata", "nldev", "6.12", "monitor", "monitor.bin"))
	if err != nil {
		t.Fatal(err)
	}
	events, err := nldev.DecodeEvents(msgs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		json bool
		want string
	}{
		{false, "[REGISTER]\tdev 0 rxe0\n" +
			"[NETDEV_ATTACH]\tdev 0 rxe0 port 1 netdev 3 veth0\n" +
			"[UNREGISTER]\tdev 0 rxe_a\n"},
		{true, `{"event_type":"[REGISTER]","rdma_index":0,"rdma_dev":"rxe0"}` + "\n" +
			`{"event_type":"[NETDEV_ATTACH]","rdma_index":0,"rdma_dev":"rxe0","port":1,"netdev_idx":3,"netdev_name":"veth0"}` + "\n" +
			`{"event_type":"[UNREGISTER]","rdma_index":0,"rdma_dev":"rxe_a"}` + "\n"},
	} {
		var out strings.Builder
		p := output.New(&out, output.Options{JSON: tt.json})
		for i := range events {
			Event(p, &events[i])
		}
		p.Flush()
		if out.String() != tt.want {
			t.Errorf("json=%v: got\n%s\nwant\n%s", tt.json, out.String(), tt.want)
		}
	}
}
