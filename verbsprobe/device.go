package verbsprobe

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// Device is an RDMA device port opened for probes: its user context, the
// device's and the port's attributes, the address its queue pairs use
// and a protection domain. It is long-lived and shared: Conns on it are
// made, used and closed from any number of goroutines at once (a
// responder makes one per peer). Close it after its Conns.
type Device struct {
	target
	c      *uverbs.Context
	attr   uverbs.DeviceAttr // QUERY_DEVICE's answer
	driver *driver           // nil: not a driver the probe knows
	pd     *uverbs.PD
}

// target is what is known of a device port while it is opened and after:
// what the address choice and the diagnoses read.
type target struct {
	opts        Options
	port        uverbs.PortAttr
	driverName  string // as sysfs names it
	verbsDevice string // "uverbs0"
	addr        Address
	mu          sync.Mutex    // guards sysdev: diagnoses of concurrent Conns
	sysdev      *sysfs.Device // see device
	// verbs is the device's context, for QUERY_GID_TABLE when
	// Options.Open opened it; gids its answer.
	verbs *uverbs.Context
	gids  []gid.Entry
}

// Address is how a device's queue pairs are addressed: a GID of its port
// (GIDIndex ≥ 0, always with a GRH), or on InfiniBand the port's LID.
type Address struct {
	// GIDIndex is the source GID's index, -1 when the address has none
	// (InfiniBand by LID) or none was chosen yet.
	GIDIndex int
	GID      gid.GID
	GIDType  gid.Type
	LID      uint16
}

// Context returns the device's uverbs context, for exchanges that speak
// to the kernel about it (RDMA CM's INIT_QP_ATTR names its queue pairs).
func (d *Device) Context() *uverbs.Context { return d.c }

// Port is the port's attributes (QUERY_PORT).
func (d *Device) Port() uverbs.PortAttr { return d.port }

// Address is the address the device's queue pairs use.
func (d *Device) Address() Address { return d.addr }

// Name is "rxe0/1".
func (d *Device) Name() string { return fmt.Sprintf("%s/%d", d.opts.Device, d.opts.Port) }

// OpenDevice opens the device port opts names for probes, up to a
// protection domain, and returns it with the result of each step (open,
// query_device, query_port, address, alloc_pd). On failure the Device is
// nil, what was made is released, and the result says why; a driver
// whose queues grdma cannot make is Result.Unsupported, with the Device
// (its protection domain) made. ctx stops the opening between steps.
func OpenDevice(ctx context.Context, opts Options) (*Device, *Result) {
	rec := newRecorder(ctx, newResult(opts), nil)
	d := openDevice(rec, withDefaults(opts))
	if d == nil {
		return nil, rec.res
	}
	if d.driver == nil {
		rec.res.Unsupported = d.unsupportedDriver()
	}
	return d, rec.res
}

func withDefaults(opts Options) Options {
	if opts.Port == 0 {
		opts.Port = 1
	}
	if opts.CompletionTimeout == 0 {
		opts.CompletionTimeout = DefaultCompletionTimeout
	}
	return opts
}

func newResult(opts Options) *Result {
	return &Result{Device: opts.Device, Port: max(opts.Port, 1), GIDIndex: AutoGID, Traffic: opts.Traffic}
}

// openDevice runs the steps of opening a device port; nil when one
// failed, after releasing what was made.
func openDevice(rec *recorder, opts Options) *Device {
	d := &Device{target: target{opts: opts, addr: Address{GIDIndex: AutoGID}}}
	rec.diag = &d.target
	if rec.steps([]stepFunc{
		{StepOpen, func() (string, error) { return d.open(rec.res) }},
		{StepQueryDevice, d.queryDevice},
		{StepQueryPort, func() (string, error) { return d.queryPort(rec.res) }},
		{StepAddress, func() (string, error) { return d.chooseAddress(rec.ctx, rec.res) }},
		{StepAllocPD, d.allocPD},
	}) {
		return d
	}
	d.close(rec)
	return nil
}

// unsupportedDriver says why the probe stops at the protection domain.
func (d *Device) unsupportedDriver() string {
	return fmt.Sprintf("driver %s not supported by the probe: its CREATE_CQ and CREATE_QP need driver data grdma does not know (checked up to ALLOC_PD)",
		d.driverName)
}

// Close releases the protection domain and closes the device, which
// frees whatever a Conn's failed teardown left. Its Conns must be closed.
func (d *Device) Close() error {
	rec := newRecorder(context.Background(), &Result{}, &d.target)
	d.close(rec)
	return rec.res.Err()
}

// close releases the device as steps: dealloc_pd, close.
func (d *Device) close(rec *recorder) {
	ctx := context.Background()
	if d.pd != nil {
		rec.step(ctx, StepDeallocPD, func() (string, error) { return "", d.c.DeallocPD(*d.pd) })
		d.pd = nil
	}
	if d.c != nil {
		// Closing also frees whatever a failed destroy left.
		rec.step(ctx, StepClose, func() (string, error) { return "", d.c.Close() })
		d.c = nil
	}
}

// describe copies what is known of the device into a result.
func (d *Device) describe(res *Result) {
	res.Device, res.Port = d.opts.Device, d.opts.Port
	res.Driver, res.VerbsDevice, res.LinkLayer = d.driverName, d.verbsDevice, d.port.LinkLayer
	res.GIDIndex, res.GID, res.GIDType, res.LID = d.addr.GIDIndex, d.addr.GID, d.addr.GIDType, d.addr.LID
}

func (d *Device) open(res *Result) (string, error) {
	var c *uverbs.Context
	var err error
	if d.opts.Open != nil {
		c, err = d.opts.Open()
	} else {
		c, err = locator.OpenSysfs(d.opts.Sysfs, d.opts.Device)
	}
	if err != nil {
		return "", d.openError(res, err)
	}
	d.c, d.verbs = c, c
	d.driverName, d.verbsDevice = c.Node.Driver, c.Node.Name
	res.Driver, res.VerbsDevice = c.Node.Driver, c.Node.Name
	if dr, ok := drivers[c.Node.Driver]; ok {
		d.driver = &dr
	}
	return fmt.Sprintf("/dev/infiniband/%s, driver %s", c.Node.Name, c.Node.Driver), nil
}

// openError says what could not be opened: a device that does not exist,
// or else what sysfs knows of it.
func (d *Device) openError(res *Result, err error) error {
	if d.opts.Open != nil {
		return err
	}
	dev, devErr := d.device()
	if sysfs.IsGone(devErr) {
		return &ib.NotFoundError{Device: d.opts.Device}
	}
	d.driverName, res.Driver = dev.Driver, dev.Driver
	if vd, err := d.opts.Sysfs.VerbsDeviceFor(d.opts.Device); err == nil {
		d.verbsDevice, res.VerbsDevice = vd.Name, vd.Name
	}
	var ud *uverbs.UnsupportedDriverError
	if errors.As(err, &ud) {
		res.Unsupported = fmt.Sprintf("driver %s not supported by the probe: %s", dev.Driver, ud.Reason)
	}
	return err
}

// device reads the RDMA device's sysfs attributes, once; only diagnoses
// need them.
func (t *target) device() (sysfs.Device, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sysdev == nil {
		dev, err := t.opts.Sysfs.Device(t.opts.Device)
		if err != nil {
			return sysfs.Device{}, err
		}
		t.sysdev = &dev
	}
	return *t.sysdev, nil
}

func (d *Device) queryDevice() (string, error) {
	attr, err := d.c.QueryDevice()
	if err != nil {
		return "", err
	}
	d.attr = attr
	if d.opts.Port > uint32(attr.PhysPortCnt) {
		return "", &ib.NotFoundError{Device: d.opts.Device, Port: d.opts.Port}
	}
	return fmt.Sprintf("vendor %#x, %d port(s), max_qp_wr %d, max_cqe %d", attr.VendorID, attr.PhysPortCnt, attr.MaxQPWr, attr.MaxCQE), nil
}

// PortNotActiveError means the port cannot carry traffic.
type PortNotActiveError struct {
	Device string
	Port   uint32
	State  ib.PortState
}

func (e *PortNotActiveError) Error() string {
	return fmt.Sprintf("port %s/%d is %s, not ACTIVE", e.Device, e.Port, e.State)
}

func (d *Device) queryPort(res *Result) (string, error) {
	var err error
	if d.port, err = d.c.QueryPort(uint8(d.opts.Port)); err != nil {
		return "", err
	}
	res.LinkLayer = d.port.LinkLayer
	if d.port.State != ib.PortActive {
		return "", &PortNotActiveError{Device: d.opts.Device, Port: d.opts.Port, State: d.port.State}
	}
	return fmt.Sprintf("ACTIVE, %s, active MTU %s", d.port.LinkLayer, d.port.ActiveMTU), nil
}

func (d *Device) allocPD() (string, error) {
	pd, err := d.c.AllocPD()
	if err != nil {
		return "", err
	}
	d.pd = &pd
	return fmt.Sprintf("pd %d", pd.Handle), nil
}

// maxRdAtomic is how many RDMA READs a queue pair of the device may keep
// outstanding: want, as far as the device allows.
func (d *Device) maxRdAtomic(want uint8) uint8 {
	if a := d.attr.MaxQPRdAtom; a > 0 && a < uint32(want) {
		return uint8(a)
	}
	return want
}
