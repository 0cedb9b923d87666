package ports

import (
	"testing"

	"github.com/grdma/grdma/nldev"
)

// TestPMACountersNone: rxe has no PMA counters in sysfs (the captured
// 6.12 tree): every port is left out and named to missing.
func TestPMACountersNone(t *testing.T) {
	refs := []nldev.DevicePort{{Device: nldev.Device{Name: "rxe0", NumPorts: 1}, Port: 1}, {Device: nldev.Device{Index: 1, Name: "rxe1", NumPorts: 1}, Port: 1}}
	var missing []string
	got, err := PMACounters(mustFS(t, rxeRoot), refs, func(r nldev.DevicePort) { missing = append(missing, r.Device.Name) })
	if err != nil || len(got) != 0 || len(missing) != 2 || missing[0] != "rxe0" || missing[1] != "rxe1" {
		t.Errorf("PMACounters = %v, %v; missing %q", got, err, missing)
	}
}
