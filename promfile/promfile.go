// Package promfile writes RDMA port metrics in the Prometheus text
// exposition format, for node_exporter's textfile collector: every hardware
// counter by name (generic: rxe, mlx5, any driver), port state, physical
// state and rate. Names follow Prometheus conventions: base units, _total
// for counters, labels device, port and counter.
package promfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
	"golang.org/x/sys/unix"
)

// Port holds the metrics of one port.
type Port struct {
	Device    string
	Port      uint32
	State     nldev.PortState
	PhysState nldev.PhysState
	// RateBytesPerSecond is the signalling rate from sysfs; 0 when unknown.
	RateBytesPerSecond float64
	Counters           []nldev.Counter
}

// Snapshot is the metrics of every port at one moment, and what could not
// be read.
type Snapshot struct {
	Ports  []Port
	Errors []ReadError
}

// ReadError is a part of a device or port the snapshot could not read: it
// is exported as grdma_export_read_error, and the rest is exported still.
type ReadError struct {
	Device string
	Port   uint32 // 0: the device (its port list)
	What   string // "ports", "counters" or "rate"
	Err    error
}

func (e *ReadError) Error() string {
	if e.Port == 0 {
		return fmt.Sprintf("%s: %s: %v", e.Device, e.What, e.Err)
	}
	return fmt.Sprintf("%s/%d: %s: %v", e.Device, e.Port, e.What, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// Collect reads every port of every device: state over netlink, counters
// with STAT_GET, rate from sysfs. A device that vanished meanwhile is left
// out, as a moment later it would be; a port without counters (siw: EINVAL
// or EOPNOTSUPP) or without a rate in sysfs has none; any other failure is
// a ReadError. Only a failure to list the devices fails the whole snapshot.
func Collect(c *nldev.Client, sys sysfs.FS) (*Snapshot, error) {
	devs, err := c.Devices()
	if err != nil {
		return nil, err
	}
	var s Snapshot
devices:
	for _, d := range devs {
		ports, err := c.Ports(d.Index)
		if err != nil {
			if !c.Gone(d.Index, err) {
				s.Errors = append(s.Errors, ReadError{Device: d.Name, What: "ports", Err: err})
			}
			continue
		}
		var got []Port
		var failed []ReadError
		for _, p := range ports {
			m := Port{Device: d.Name, Port: p.Index, State: p.State, PhysState: p.PhysState}
			pc, err := c.PortCounters(d.Index, p.Index)
			switch {
			case err == nil:
				m.Counters = pc.Counters
			case c.Gone(d.Index, err):
				continue devices
			case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP):
			default:
				failed = append(failed, ReadError{Device: d.Name, Port: p.Index, What: "counters", Err: err})
			}
			rate, err := sys.PortRate(d.Name, p.Index)
			switch {
			case err == nil:
				m.RateBytesPerSecond = float64(rate.DeciGbps) * 1e8 / 8
			case !sysfs.IsGone(err):
				failed = append(failed, ReadError{Device: d.Name, Port: p.Index, What: "rate", Err: err})
			}
			got = append(got, m)
		}
		s.Ports = append(s.Ports, got...)
		s.Errors = append(s.Errors, failed...)
	}
	return &s, nil
}

// metric families, in output order.
var families = []struct {
	name, typ, help string
	value           func(p *Port) (float64, bool)
}{
	{"grdma_port_state", "gauge", "Logical port state (1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER).",
		func(p *Port) (float64, bool) { return float64(p.State), true }},
	{"grdma_port_active", "gauge", "1 when the port is ACTIVE.",
		func(p *Port) (float64, bool) { return boolValue(p.State == nldev.PortActive), true }},
	{"grdma_port_physical_state", "gauge", "Physical port state (2 POLLING, 3 DISABLED, 5 LINK_UP, ...).",
		func(p *Port) (float64, bool) { return float64(p.PhysState), true }},
	{"grdma_port_rate_bytes_per_second", "gauge", "Signalling rate of the port (sysfs ports/P/rate).",
		func(p *Port) (float64, bool) { return p.RateBytesPerSecond, p.RateBytesPerSecond > 0 }},
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// WriteText writes the snapshot in the Prometheus text format.
func (s *Snapshot) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, f := range families {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", f.name, f.help, f.name, f.typ)
		for i := range s.Ports {
			p := &s.Ports[i]
			if v, ok := f.value(p); ok {
				fmt.Fprintf(bw, "%s{device=%s,port=\"%d\"} %v\n", f.name, quote(p.Device), p.Port, v)
			}
		}
	}
	const counter = "grdma_port_hw_counter_total"
	fmt.Fprintf(bw, "# HELP %s Hardware counter of an RDMA port, named as its driver names it (rdma statistic show).\n# TYPE %s counter\n", counter, counter)
	for i := range s.Ports {
		p := &s.Ports[i]
		for _, c := range p.Counters {
			fmt.Fprintf(bw, "%s{device=%s,port=\"%d\",counter=%s} %d\n", counter, quote(p.Device), p.Port, quote(c.Name), c.Value)
		}
	}
	const failed, failures = "grdma_export_read_error", "grdma_export_read_errors"
	fmt.Fprintf(bw, "# HELP %s Parts of devices and ports this export could not read (what: ports, counters, rate).\n# TYPE %s gauge\n%s %d\n", failures, failures, failures, len(s.Errors))
	fmt.Fprintf(bw, "# HELP %s 1 for each part of a device or port this export could not read.\n# TYPE %s gauge\n", failed, failed)
	for _, e := range s.Errors {
		fmt.Fprintf(bw, "%s{device=%s,port=\"%d\",what=%s} 1\n", failed, quote(e.Device), e.Port, quote(e.What))
	}
	return bw.Flush()
}

// quote writes a label value with the text format's escapes.
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// CheckResult is one health check outcome to export (see package health).
type CheckResult struct {
	Check, Subject string
	Status         string // PASS, WARN or FAIL
}

// checkStatusValue maps a status to the gauge value: 0 pass, 1 warn, 2 fail.
var checkStatusValue = map[string]int{"PASS": 0, "WARN": 1, "FAIL": 2}

// WriteChecks writes health check results as gauges: the status of each
// check and subject, and when the checks ran.
func WriteChecks(w io.Writer, results []CheckResult, ranAt float64) error {
	bw := bufio.NewWriter(w)
	fmt.Fprint(bw, "# HELP grdma_check_status Outcome of a grdma health check: 0 PASS, 1 WARN, 2 FAIL.\n# TYPE grdma_check_status gauge\n")
	for _, r := range results {
		fmt.Fprintf(bw, "grdma_check_status{check=%s,subject=%s} %d\n", quote(r.Check), quote(r.Subject), checkStatusValue[r.Status])
	}
	fmt.Fprintf(bw, "# HELP grdma_check_last_run_timestamp_seconds When the checks ran.\n# TYPE grdma_check_last_run_timestamp_seconds gauge\ngrdma_check_last_run_timestamp_seconds %.3f\n", ranAt)
	return bw.Flush()
}
