package sysfs

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Rate is the content of ports/N/rate, e.g. "100 Gb/sec (4X EDR)": the
// nominal signalling rate (lanes × per-lane rate), the link width in lanes
// and the per-lane speed name.
type Rate struct {
	DeciGbps int    // rate in tenths of Gb/s: 1000 for "100", 25 for "2.5"
	Lanes    int    // 4 for "4X"
	Speed    string // "SDR" ... "XDR"; "" where old kernels omitted " SDR"
}

// Gbps returns the nominal rate in Gb/s.
func (r Rate) Gbps() float64 { return float64(r.DeciGbps) / 10 }

// String formats r the way the kernel prints it.
func (r Rate) String() string {
	s := strconv.Itoa(r.DeciGbps / 10)
	if r.DeciGbps%10 != 0 {
		s += ".5"
	}
	s += " Gb/sec (" + strconv.Itoa(r.Lanes) + "X"
	if r.Speed != "" {
		s += " " + r.Speed
	}
	return s + ")"
}

// ParseRate parses the kernel's rate_show() format
// "<Gb/s>[.5] Gb/sec (<lanes>X[ <SPEED>])". The speed name is optional
// because kernels before 4.x-era HDR support printed SDR as "(4X)".
func ParseRate(s string) (Rate, error) {
	bad := func() (Rate, error) {
		return Rate{}, fmt.Errorf("rate %q: want \"<Gb/s> Gb/sec (<lanes>X <speed>)\"", s)
	}
	num, rest, ok := strings.Cut(s, " Gb/sec (")
	if !ok || !strings.HasSuffix(rest, ")") {
		return bad()
	}
	whole, half, hasHalf := strings.Cut(num, ".")
	gbps, err := strconv.Atoi(whole)
	// Bounded so that the rate in tenths fits an int.
	if err != nil || gbps < 0 || gbps > (math.MaxInt-5)/10 || (hasHalf && half != "5") {
		return bad()
	}
	r := Rate{DeciGbps: gbps * 10}
	if hasHalf {
		r.DeciGbps += 5
	}
	width, speed, _ := strings.Cut(strings.TrimSuffix(rest, ")"), " ")
	lanes, ok := strings.CutSuffix(width, "X")
	if !ok {
		return bad()
	}
	if r.Lanes, err = strconv.Atoi(lanes); err != nil || r.Lanes <= 0 {
		return bad()
	}
	r.Speed = speed
	return r, nil
}
