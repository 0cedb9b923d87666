package nldev_test

import (
	"math"
	"testing"

	"github.com/grdma/grdma/nldev"
)

func TestCounterRate(t *testing.T) {
	cases := []struct {
		old, cur uint64
		secs     float64
		want     float64
	}{
		{100, 300, 2, 100},
		{100, 100, 1, 0},
		{1000, 40, 1, 40},                          // reset: counts from zero
		{math.MaxUint64 - 1, math.MaxUint64, 1, 1}, // no float overflow on large values
	}
	for _, c := range cases {
		if got := nldev.CounterRate(c.old, c.cur, c.secs); got != c.want {
			t.Errorf("nldev.CounterRate(%d, %d, %v) = %v, want %v", c.old, c.cur, c.secs, got, c.want)
		}
	}
}

// TestRatesSince: per counter, in the current sample's order; a counter
// the older sample lacks counts from zero.
func TestRatesSince(t *testing.T) {
	old := nldev.PortCounters{Counters: []nldev.Counter{{Name: "a", Value: 10}, {Name: "b", Value: 5}}}
	cur := nldev.PortCounters{Counters: []nldev.Counter{{Name: "b", Value: 25}, {Name: "a", Value: 10}, {Name: "c", Value: 8}}}
	got := cur.RatesSince(&old, 2)
	want := []nldev.Rate{{"b", 10}, {"a", 0}, {"c", 4}}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%v, want %v", got, want)
		}
	}
}
