package nldev

// CounterRate is the per-second rate of a counter between two samples
// secs apart; a counter below its previous value was reset and counts from
// zero.
func CounterRate(old, cur uint64, secs float64) float64 {
	delta := cur - old
	if cur < old {
		delta = cur
	}
	return float64(delta) / secs
}

// Rate is a counter's per-second rate between two samples.
type Rate struct {
	Name      string
	PerSecond float64
}

// RatesSince returns the rate of each of pc's counters, in pc's order,
// since sample old taken secs earlier; a counter old lacks counts from
// zero.
func (pc *PortCounters) RatesSince(old *PortCounters, secs float64) []Rate {
	before := make(map[string]uint64, len(old.Counters))
	for _, c := range old.Counters {
		before[c.Name] = c.Value
	}
	out := make([]Rate, len(pc.Counters))
	for i, c := range pc.Counters {
		out[i] = Rate{Name: c.Name, PerSecond: CounterRate(before[c.Name], c.Value, secs)}
	}
	return out
}

// FindPortCounters returns the sample of the same device and port as pc
// in list, or nil.
func FindPortCounters(list []PortCounters, pc *PortCounters) *PortCounters {
	for i := range list {
		if list[i].DevIndex == pc.DevIndex && list[i].Port == pc.Port {
			return &list[i]
		}
	}
	return nil
}
