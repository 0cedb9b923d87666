// Package exporter exports RDMA metrics to Prometheus: a
// prometheus.Collector that reads every device and port at scrape time
// (states, rates, MTU and width, hardware and PMA counters, the RoCE v2
// IPv4 GID a job would choose, resource counts and, optionally, cached
// health checks), the HTTP server of `grdma exporter` (promhttp behind
// exporter-toolkit's TLS and basic auth), and WriteTextfile, which writes
// the same collectors' metrics for node_exporter's textfile collector
// (`grdma stat export`, `grdma check --textfile`). Every metric is defined
// once, in Families.
//
// A device that vanishes while it is read is left out of that scrape;
// anything else that cannot be read is counted
// (grdma_export_read_error, grdma_exporter_read_errors_total) and the rest
// is exported: a collection never fails.
package exporter

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/health"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/node"
	"github.com/grdma/grdma/pci"
	"github.com/grdma/grdma/ports"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/topo"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a Collector.
type Options struct {
	// Sysfs reads /sys (and /dev, /proc below the same root).
	Sysfs sysfs.FS
	// Dial opens an RDMA netlink client for one collection; it is closed
	// when the collection ends, so concurrent scrapes share nothing.
	Dial func() (*nldev.Client, error)
	// OpenVerbs, when set, replaces opening a device's uverbs device
	// for QUERY_PORT (the active MTU); see ports.Reader.
	OpenVerbs func(dev string) (ports.PortQuerier, error)

	// Checks turns on the health checks "devices" and "ports"
	// (grdma_check_status) with the expectations CheckExpect. They are
	// computed from a collection's reading at most once per
	// CheckInterval (default one minute); scrapes in between export the
	// cached results.
	Checks        bool
	CheckInterval time.Duration
	CheckExpect   health.Expect

	// ReuseFor is how long a reading is reused: scrapes that start
	// while one is read wait for it and export it, and so do scrapes
	// that start less than ReuseFor after it began (0: DefaultReuseFor).
	// However many scrape at once, the devices are read once (on mlx5
	// each reading is firmware commands, on the queue jobs use to set up
	// their queue pairs).
	ReuseFor time.Duration

	// PCIe turns on the PCIe topology metrics (grdma_pcie_*, grdma_gpu_*):
	// the links from every GPU and RDMA device up to its root port, the
	// GPU–NIC path types and AER counters (package topo), read with each
	// reading of the devices (shared as that is). PCIeGPUs are functions to treat as GPUs besides those
	// found by ID (topo.Options.GPUs).
	PCIe     bool
	PCIeGPUs []pci.Address

	// Now returns the time; nil means time.Now.
	Now func() time.Time
}

// DefaultReuseFor is how long a reading serves further scrapes.
const DefaultReuseFor = time.Second

// readErrorKinds are the values of the what label of the read errors.
var readErrorKinds = []string{"devices", "device", "ports", "counters", "pma", "gids", "resources", "pcie"}

// DefaultCheckInterval is the minimum time between two runs of the checks.
const DefaultCheckInterval = time.Minute

// Collector is a prometheus.Collector of the RDMA devices and ports of
// this node, read at every Collect.
type Collector struct {
	opts Options

	mu       sync.Mutex
	errTotal map[string]float64 // grdma_exporter_read_errors_total by what
	lastErrs []node.ReadError
	checks   []health.Result
	checkAt  time.Time

	// The reading being made, or the last one, and when it began.
	readMu  sync.Mutex
	reading *reading
}

// reading is one read of the node, shared by the scrapes that want it;
// s is set when done is closed.
type reading struct {
	began time.Time
	done  chan struct{}
	s     *scrape
}

// New returns a collector reading through opts.
func New(opts Options) *Collector {
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ReuseFor <= 0 {
		opts.ReuseFor = DefaultReuseFor
	}
	// Every kind starts at 0, so that the first error of a kind is an
	// increase, not the counter's first sample.
	errTotal := map[string]float64{}
	for _, what := range readErrorKinds {
		errTotal[what] = 0
	}
	return &Collector{opts: opts, errTotal: errTotal}
}

// Describe sends the descriptors of every family the collector exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range Families {
		if f == famCheckStatus || f == famCheckRun {
			if !c.opts.Checks {
				continue
			}
		}
		if slices.Contains(pcieFamilies, f) && !c.opts.PCIe {
			continue
		}
		ch <- f.desc
	}
}

// Errors returns what the last collection could not read.
func (c *Collector) Errors() []node.ReadError {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.lastErrs)
}

// Collect sends the metrics of a reading of every device and port: its
// own, or one it shares (Options.ReuseFor).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	start := c.opts.Now()
	e := &emitter{ch: ch, seen: map[string]bool{}}
	s := c.shared(start)
	s.export(e)
	if s.topo != nil {
		exportTopology(e, s.topo)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.opts.Checks {
		if c.checkAt.IsZero() || start.Sub(c.checkAt) >= c.opts.CheckInterval {
			c.checks = append(health.CheckDevices(s.node, c.opts.CheckExpect), health.CheckPorts(s.node, c.opts.CheckExpect)...)
			c.checkAt = start
		}
		exportChecks(e, c.checks, c.checkAt)
	}
	c.lastErrs = s.errs
	e.emit(famReadErrors, float64(len(s.errs)))
	for _, err := range s.errs {
		e.emit(famReadError, 1, err.Device, strconv.FormatUint(uint64(err.Port), 10), err.What)
	}
	for _, what := range slices.Sorted(mapKeys(c.errTotal)) {
		e.emit(famScrapeErrors, c.errTotal[what], what)
	}
	e.emit(famDuration, c.opts.Now().Sub(start).Seconds())
}

func mapKeys(m map[string]float64) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// shared returns the reading in progress, or one begun less than
// ReuseFor before now, or makes one. The read errors of a reading are
// counted once (grdma_exporter_read_errors_total), however many scrapes
// export it.
func (c *Collector) shared(now time.Time) *scrape {
	c.readMu.Lock()
	r := c.reading
	if r == nil || (isDone(r.done) && now.Sub(r.began) >= c.opts.ReuseFor) {
		r = &reading{began: now, done: make(chan struct{})}
		c.reading = r
		c.readMu.Unlock()
		defer close(r.done)
		r.s = c.read()
		c.mu.Lock()
		for _, err := range r.s.errs {
			c.errTotal[err.What]++
		}
		c.mu.Unlock()
		return r.s
	}
	c.readMu.Unlock()
	<-r.done
	return r.s
}

func isDone(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// port is what one collection read of a port beyond the node's reading:
// its hardware counters and the PMA data counters it exports.
type port struct {
	counters []nldev.Counter
	rcv      pmaCounter // port_rcv_data(_64)
	xmit     pmaCounter // port_xmit_data(_64)
}

// pmaCounter is a PMA counter's value in bytes, if the port has it.
type pmaCounter struct {
	v  uint64
	ok bool
}

// scrape is one collection's reading.
type scrape struct {
	node  *node.Snapshot
	ports map[string]*port // by "dev/port"
	res   []nldev.ResSummary
	errs  []node.ReadError
	// topo is the PCI topology (Options.PCIe); nil when off or unreadable.
	topo *topo.Topology
}

func portKey(dev string, p uint32) string { return dev + "/" + strconv.FormatUint(uint64(p), 10) }

// read reads the node once: the node.Snapshot (devices, ports, GID tables)
// and what only the exporter needs (counters, PMA counters, resources).
func (c *Collector) read() *scrape {
	s := &scrape{ports: map[string]*port{}}
	if c.opts.PCIe {
		c.readPCIe(s)
	}
	nl, err := c.opts.Dial()
	if err != nil {
		s.node = &node.Snapshot{DevicesErr: err, PortsErr: err}
		s.errs = append(s.errs, node.ReadError{What: "devices", Err: err})
		return s
	}
	defer nl.Close()
	s.node = node.Reader{Sysfs: c.opts.Sysfs, Netlink: nl, OpenVerbs: c.opts.OpenVerbs}.Read()
	switch {
	case s.node.DevicesErr != nil: // ErrNoRDMANetlink too: no RDMA to export
		s.errs = append(s.errs, node.ReadError{What: "devices", Err: s.node.DevicesErr})
	case s.node.PortsErr != nil:
		s.errs = append(s.errs, node.ReadError{What: "ports", Err: s.node.PortsErr})
	}
	s.errs = append(s.errs, s.node.Errors...)
	for i := range s.node.Ports {
		p := &s.node.Ports[i].Port
		if gerr := s.node.Ports[i].GIDErr; gerr != nil {
			s.errs = append(s.errs, node.ReadError{Device: p.Device, Port: p.Port, What: "gids", Err: gerr})
		}
		pr := &port{}
		pc, err := nl.PortCounters(p.DevIndex, p.Port)
		switch {
		case err == nil:
			pr.counters = pc.Counters
		case nl.Gone(p.DevIndex, err):
		case nldev.NoCounters(err): // siw
		default:
			s.errs = append(s.errs, node.ReadError{Device: p.Device, Port: p.Port, What: "counters", Err: err})
		}
		pr.rcv, err = c.readPMA(p.Device, p.Port, "port_rcv_data")
		if err == nil {
			pr.xmit, err = c.readPMA(p.Device, p.Port, "port_xmit_data")
		}
		if err != nil {
			s.errs = append(s.errs, node.ReadError{Device: p.Device, Port: p.Port, What: "pma", Err: err})
		}
		s.ports[portKey(p.Device, p.Port)] = pr
	}
	if len(s.node.Devices) > 0 {
		s.res, err = nl.ResSummaries()
		if err != nil {
			s.errs = append(s.errs, node.ReadError{What: "resources", Err: err})
		}
	}
	return s
}

// roceV2IPv4 is the GID a job would choose on a RoCE port.
var roceV2IPv4 = gid.Criteria{Type: gid.TypeRoCEv2, Family: gid.IPv4}

func (s *scrape) export(e *emitter) {
	netdevs := map[string][]string{}
	for _, pi := range s.node.Ports {
		p := pi.Port
		if p.Netdev != "" && !slices.Contains(netdevs[p.Device], p.Netdev) {
			netdevs[p.Device] = append(netdevs[p.Device], p.Netdev)
		}
	}
	for _, d := range s.node.Devices {
		e.emit(famDeviceInfo, 1, d.Name, d.Driver, guid(d.Info.NodeGUID), d.Info.FWVersion, d.Info.NodeType.String(),
			strings.Join(netdevs[d.Name], ","))
	}
	for _, pi := range s.node.Ports {
		p := pi.Port
		dev, num := p.Device, strconv.FormatUint(uint64(p.Port), 10)
		e.emit(famPortState, float64(p.State), dev, num)
		e.emit(famPortActive, boolValue(p.State == ib.PortActive), dev, num)
		e.emit(famPortPhys, float64(p.PhysState), dev, num)
		if p.RateDeciGbps > 0 {
			e.emit(famPortRate, float64(p.RateDeciGbps)*1e8/8, dev, num)
		}
		if b := p.ActiveMTU.Bytes(); b > 0 && p.MTUSource != ports.MTUUnknown {
			e.emit(famPortMTU, float64(b), dev, num)
		}
		if l := p.Width.Lanes(); l > 0 {
			e.emit(famPortWidth, float64(l), dev, num)
		}
		e.emit(famPortInfo, 1, dev, num, p.LinkLayer.String(), p.Netdev)
		if p.LinkLayer == ib.LinkLayerEthernet {
			if g, err := gid.Select(pi.GIDs, roceV2IPv4); err == nil {
				e.emit(famGIDInfo, 1, dev, num, strconv.Itoa(g.Index), g.GID.String(), g.Netdev)
				e.emit(famGIDIndex, float64(g.Index), dev, num)
			}
		}
		pr := s.ports[portKey(dev, p.Port)]
		for _, ctr := range pr.counters {
			e.emit(famHWCounter, float64(ctr.Value), dev, num, ctr.Name)
		}
		if pr.rcv.ok {
			e.emit(famRcvBytes, float64(pr.rcv.v), dev, num)
		}
		if pr.xmit.ok {
			e.emit(famXmitBytes, float64(pr.xmit.v), dev, num)
		}
	}
	known := map[string]bool{}
	for _, d := range s.node.Devices {
		known[d.Name] = true
	}
	for _, r := range s.res {
		if !known[r.Device] {
			continue // vanished (or appeared) between the two listings
		}
		for _, cnt := range r.Counts {
			e.emit(famResources, float64(cnt.Curr), r.Device, cnt.Name)
		}
	}
}

// readPMA reads PMA counter name of a port, its 64-bit variant (name_64)
// when the port has one: the 32-bit data counters saturate within seconds
// on a fast link. Only these files are read: each read of a PMA counter
// is a MAD to the device's firmware.
func (c *Collector) readPMA(dev string, port uint32, name string) (pmaCounter, error) {
	v, ok, err := c.opts.Sysfs.PMACounter(dev, port, name+"_64")
	if err == nil && !ok {
		v, ok, err = c.opts.Sysfs.PMACounter(dev, port, name)
	}
	return pmaCounter{v, ok}, err
}

// guid formats a node GUID as sysfs and rdma print it: 0c42:a103:0012:3456.
func guid(v uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", v>>48, v>>32&0xffff, v>>16&0xffff, v&0xffff)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// checkValue maps a status to grdma_check_status: 0 pass, 1 warn, 2 fail.
var checkValue = map[health.Status]float64{health.Pass: 0, health.Warn: 1, health.Fail: 2}

func exportChecks(e *emitter, results []health.Result, ranAt time.Time) {
	for _, r := range results {
		e.emit(famCheckStatus, checkValue[r.Status], r.Name, r.Subject)
	}
	e.emit(famCheckRun, float64(ranAt.UnixMilli())/1000)
}

// CheckResults is a prometheus.Collector of health check results computed
// elsewhere (`grdma check --textfile`): grdma_check_status and
// grdma_check_last_run_timestamp_seconds, as the exporter's cached checks
// export them.
type CheckResults struct {
	Results []health.Result
	RanAt   time.Time
}

// Describe sends the descriptors of the check families.
func (r *CheckResults) Describe(ch chan<- *prometheus.Desc) {
	ch <- famCheckStatus.desc
	ch <- famCheckRun.desc
}

// Collect sends the results.
func (r *CheckResults) Collect(ch chan<- prometheus.Metric) {
	exportChecks(&emitter{ch: ch, seen: map[string]bool{}}, r.Results, r.RanAt)
}

// WriteTextfile writes the results alone to path for node_exporter's
// textfile collector (see the function WriteTextfile).
func (r *CheckResults) WriteTextfile(path string) error {
	reg := prometheus.NewRegistry()
	if err := reg.Register(r); err != nil {
		return err
	}
	return WriteTextfile(path, reg)
}
