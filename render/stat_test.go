package render

import (
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/output"
)

func TestRatesText(t *testing.T) {
	var out strings.Builder
	p := output.New(&out, output.Options{})
	old := nldev.PortCounters{Device: "rxe0", Port: 1, Counters: []nldev.Counter{{Name: "sent_pkts", Value: 100}}}
	cur := nldev.PortCounters{Device: "rxe0", Port: 1, Counters: []nldev.Counter{{Name: "sent_pkts", Value: 350}}}
	Rates(p, &cur, cur.RatesSince(&old, 2.5), time.Time{}, 2.5)
	p.Flush()
	if want := "link rxe0/1 interval 2.500s \n    sent_pkts 100.0/s \n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}
