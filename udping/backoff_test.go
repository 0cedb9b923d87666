package udping

import (
	"testing"
	"time"
)

// A queue pair that keeps failing is remade at once, then after 100 ms,
// 200 ms, ... up to 10 s between remakes; after a quiet minute at once
// again.
func TestRestartBackoff(t *testing.T) {
	var b restartBackoff
	now := time.Unix(1000, 0)
	var got []time.Duration
	for range 10 {
		d := b.next(now)
		got = append(got, d)
		now = now.Add(d + time.Millisecond) // the remade queue pair fails at once
	}
	want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond, 10 * time.Second, 10 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays %v, want %v", got, want)
		}
	}
	if d := b.next(now.Add(restartQuiet + time.Second)); d != 0 {
		t.Errorf("after a quiet minute: %v, want at once", d)
	}
	if d := b.next(now.Add(restartQuiet + 2*time.Second)); d != restartFirstDelay {
		t.Errorf("failing again a second later: %v, want %v", d, restartFirstDelay)
	}
}
