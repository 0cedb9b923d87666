package main

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/grdma/grdma/nldev"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

func (a *app) resCommand() *cobra.Command {
	return &cobra.Command{
		Use: `res [show|list] [DEV]
  res show qp|cm_id [link DEV[/PORT|/-] | dev DEV] [FILTER VALUE]...
  res show cq|mr|pd|ctx|srq [dev DEV] [FILTER VALUE]...`,
		Aliases: []string{"resource"},
		Short:   "Show RDMA resources: object counts, QPs, CM IDs, CQs, MRs, PDs, contexts, SRQs",
		Long: `Show how many objects each RDMA device tracks, or list the objects of one
kind, as rdma resource does (same text and JSON). Objects are read with one
dump per device and printed as they arrive, so memory stays flat however
many there are.

Filters (FILTER VALUE pairs, keys abbreviable to a unique prefix):
  qp     lqpn rqpn pid sq-psn rq-psn type path-mig-state state pdn comm
  cm_id  lqpn qp-type state ps pid src-addr src-port dst-addr dst-port cm-idn comm
  cq     users poll-ctx pid cqn ctxn comm
  mr     rkey lkey mrlen pid mrn pdn comm
  pd     users pid ctxn pdn comm
  ctx    pid ctxn comm
  srq    pid srqn type pdn cqn lqpn comm
Numeric values are numbers (decimal or 0x hex, 64-bit) and inclusive ranges,
comma separated: "lqpn 1-3,7". Other values are comma lists of names,
case-insensitive: "state rts,init". An object lacking the filtered field
never matches; a malformed filter is an error (exit 2). comm is the process
name of user objects, the module name of kernel objects. One plain object
number (lqpn with a port, cm-idn with a port, cqn, mrn, pdn, ctxn, srqn) is
looked up directly instead of dumping everything.

link DEV/- lists the QPs and CM IDs not bound to a port yet; dev DEV is
accepted for every object. comm is not an rdma filter.
-dd adds driver-internal objects and the driver's attributes (drv_*).
-r prints the driver's raw description of QPs, CQs, MRs and SRQs (needs
CAP_NET_ADMIN and driver support; ignored for other objects; filters other
than the object number do not apply). JSON is rdma's ("data": byte values);
text differs from rdma on purpose: "data" followed by the bytes in hex,
separated by spaces (rdma runs decimal bytes together).`,
		Example: `  grdma res
  grdma -j res show rxe0
  grdma res show qp
  grdma res show qp link mlx5_0/1 state RTS type RC,UD
  grdma -j res show cq dev rxe0 cqn 1
  grdma res show mr pid 4242
  grdma -dd res show qp lqpn 1-100`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.res(cmd, newArgv(args, "grdma res help"))
		},
	}
}

// resObject is one kind of `res show` object: its filters (rdma's, in
// rdma's order, plus comm) and how to print it.
type resObject struct {
	typ     nldev.ResType
	filters []filterSpec
	newObj  func() nldev.ResObject
	render  func(rp *resPrinter, o nldev.ResObject)
}

// qpTypeNames are the QP type names a filter accepts.
var qpTypeNames = append(append([]string{}, nldev.QPTypeNames...), "DRIVER")

var resObjects = []resObject{
	{
		typ:    nldev.ResQP,
		newObj: func() nldev.ResObject { return new(nldev.QP) },
		render: func(rp *resPrinter, o nldev.ResObject) { rp.qp(o.(*nldev.QP)) },
		filters: []filterSpec{
			idFilter("lqpn", nldev.AttrResLQPN, func(q *nldev.QP) uint64 { return uint64(q.LQPN) }),
			numFilter("rqpn", nldev.AttrResRQPN, func(q *nldev.QP) uint64 { return uint64(q.RQPN) }),
			pidFilter,
			numFilter("sq-psn", nldev.AttrResSQPSN, func(q *nldev.QP) uint64 { return uint64(q.SQPSN) }),
			numFilter("rq-psn", nldev.AttrResRQPSN, func(q *nldev.QP) uint64 { return uint64(q.RQPSN) }),
			strFilter("type", nldev.AttrResType, qpTypeNames, func(q *nldev.QP) string { return q.Type.String() }),
			strFilter("path-mig-state", nldev.AttrResPathMigState, nldev.PathMigStateNames, func(q *nldev.QP) string { return q.PathMigState.String() }),
			strFilter("state", nldev.AttrResState, nldev.QPStateNames, func(q *nldev.QP) string { return q.State.String() }),
			numFilter("pdn", nldev.AttrResPDN, func(q *nldev.QP) uint64 { return uint64(q.PDN) }),
			commFilter,
		},
	},
	{
		typ:    nldev.ResCMID,
		newObj: func() nldev.ResObject { return new(nldev.CMID) },
		render: func(rp *resPrinter, o nldev.ResObject) { rp.cmID(o.(*nldev.CMID)) },
		filters: []filterSpec{
			numFilter("lqpn", nldev.AttrResLQPN, func(c *nldev.CMID) uint64 { return uint64(c.LQPN) }),
			strFilter("qp-type", nldev.AttrResType, qpTypeNames, func(c *nldev.CMID) string { return c.QPType.String() }),
			strFilter("state", nldev.AttrResState, nldev.CMStateNames, func(c *nldev.CMID) string { return c.State.String() }),
			strFilter("ps", nldev.AttrResPS, []string{"IPoIB", "TCP", "UDP"}, func(c *nldev.CMID) string { return rdmaPSName(c.PS) }),
			pidFilter,
			addrFilter("src-addr", nldev.AttrResSrcAddr, func(c *nldev.CMID) netip.AddrPort { return c.SrcAddr }),
			portFilter("src-port", nldev.AttrResSrcAddr, func(c *nldev.CMID) netip.AddrPort { return c.SrcAddr }),
			addrFilter("dst-addr", nldev.AttrResDstAddr, func(c *nldev.CMID) netip.AddrPort { return c.DstAddr }),
			portFilter("dst-port", nldev.AttrResDstAddr, func(c *nldev.CMID) netip.AddrPort { return c.DstAddr }),
			idFilter("cm-idn", nldev.AttrResCMIDN, func(c *nldev.CMID) uint64 { return uint64(c.ID) }),
			commFilter,
		},
	},
	{
		typ:    nldev.ResCQ,
		newObj: func() nldev.ResObject { return new(nldev.CQ) },
		render: func(rp *resPrinter, o nldev.ResObject) { rp.cq(o.(*nldev.CQ)) },
		filters: []filterSpec{
			numFilter("users", nldev.AttrResUseCnt, func(c *nldev.CQ) uint64 { return c.Users }),
			strFilter("poll-ctx", nldev.AttrResPollCtx, nldev.RdmaPollCtxNames, func(c *nldev.CQ) string { return rdmaPollCtxName(c.PollCtx) }),
			pidFilter,
			idFilter("cqn", nldev.AttrResCQN, func(c *nldev.CQ) uint64 { return uint64(c.CQN) }),
			numFilter("ctxn", nldev.AttrResCtxN, func(c *nldev.CQ) uint64 { return uint64(c.CtxN) }),
			commFilter,
		},
	},
	{
		typ:    nldev.ResMR,
		newObj: func() nldev.ResObject { return new(nldev.MR) },
		render: func(rp *resPrinter, o nldev.ResObject) { rp.mr(o.(*nldev.MR)) },
		filters: []filterSpec{
			numFilter("rkey", nldev.AttrResRKey, func(m *nldev.MR) uint64 { return uint64(m.RKey) }),
			numFilter("lkey", nldev.AttrResLKey, func(m *nldev.MR) uint64 { return uint64(m.LKey) }),
			numFilter("mrlen", nldev.AttrResMRLen, func(m *nldev.MR) uint64 { return m.Len }),
			pidFilter,
			idFilter("mrn", nldev.AttrResMRN, func(m *nldev.MR) uint64 { return uint64(m.MRN) }),
			numFilter("pdn", nldev.AttrResPDN, func(m *nldev.MR) uint64 { return uint64(m.PDN) }),
			commFilter,
		},
	},
	{
		typ:    nldev.ResPD,
		newObj: func() nldev.ResObject { return new(nldev.PD) },
		render: func(rp *resPrinter, o nldev.ResObject) { rp.pd(o.(*nldev.PD)) },
		filters: []filterSpec{
			numFilter("users", nldev.AttrResUseCnt, func(d *nldev.PD) uint64 { return d.Users }),
			pidFilter,
			numFilter("ctxn", nldev.AttrResCtxN, func(d *nldev.PD) uint64 { return uint64(d.CtxN) }),
			idFilter("pdn", nldev.AttrResPDN, func(d *nldev.PD) uint64 { return uint64(d.PDN) }),
			commFilter,
		},
	},
	{
		typ:    nldev.ResCtx,
		newObj: func() nldev.ResObject { return new(nldev.Ctx) },
		render: func(rp *resPrinter, o nldev.ResObject) { rp.ctx(o.(*nldev.Ctx)) },
		filters: []filterSpec{
			pidFilter,
			idFilter("ctxn", nldev.AttrResCtxN, func(c *nldev.Ctx) uint64 { return uint64(c.CtxN) }),
			commFilter,
		},
	},
	{
		typ:    nldev.ResSRQ,
		newObj: func() nldev.ResObject { return new(nldev.SRQ) },
		render: func(rp *resPrinter, o nldev.ResObject) { rp.srq(o.(*nldev.SRQ)) },
		filters: []filterSpec{
			pidFilter,
			idFilter("srqn", nldev.AttrResSRQN, func(s *nldev.SRQ) uint64 { return uint64(s.SRQN) }),
			strFilter("type", nldev.AttrResType, nldev.SRQTypeNames, func(s *nldev.SRQ) string { return s.Type.String() }),
			numFilter("pdn", nldev.AttrResPDN, func(s *nldev.SRQ) uint64 { return uint64(s.PDN) }),
			numFilter("cqn", nldev.AttrResCQN, func(s *nldev.SRQ) uint64 { return uint64(s.CQN) }),
			{key: "lqpn", qpList: true},
			commFilter,
		},
	},
}

// addrFilter matches a CM ID's IP address (src-addr, dst-addr).
func addrFilter(key string, attr nldev.Attr, get func(*nldev.CMID) netip.AddrPort) filterSpec {
	return filterSpec{key: key, normalize: normalizeAddr, str: func(o nldev.ResObject, _ commLookup) (string, bool) {
		c := o.(*nldev.CMID)
		a := get(c)
		return a.Addr().String(), c.Has(attr) && a.IsValid()
	}}
}

// normalizeAddr checks an address filter value and writes it as the
// kernel's address will be written, so "::FFFF:1.2.3.4" matches.
func normalizeAddr(s string) (string, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return "", fmt.Errorf("%q is not an IP address", s)
	}
	return a.String(), nil
}

// portFilter matches a CM ID's port (src-port, dst-port).
func portFilter(key string, attr nldev.Attr, get func(*nldev.CMID) netip.AddrPort) filterSpec {
	return filterSpec{key: key, num: func(o nldev.ResObject) (uint64, bool) {
		c := o.(*nldev.CMID)
		a := get(c)
		return uint64(a.Port()), c.Has(attr) && a.IsValid()
	}}
}

func (a *app) res(cmd *cobra.Command, args *argv) error {
	verb, err := args.keyword("command", "show", "show", "list", "help")
	if err != nil {
		return err
	}
	if verb == "help" {
		return cmd.Help()
	}
	if args.empty() {
		return a.resSummary("")
	}
	names := make([]string, len(resObjects))
	for i, o := range resObjects {
		names[i] = o.typ.String()
	}
	word := args.next()
	name, err := args.match("object", word, names)
	if err != nil {
		if !args.empty() {
			return err
		}
		// rdma res show DEV: a device name where an object would be.
		return a.resSummary(word)
	}
	for _, o := range resObjects {
		if o.typ.String() == name {
			sel, err := parseResArgs(args, &o)
			if err != nil {
				return err
			}
			sel.raw = a.opts.raw && o.typ.HasRaw()
			return a.resShow(&o, sel)
		}
	}
	return nil
}

// resSelection is what a `res show OBJECT` command line asks for.
type resSelection struct {
	dev      string // "" for every device
	port     uint32 // 0 for every port
	portless bool   // link DEV/-: objects bound to no port
	filters  []filter
	raw      bool // -r: the driver's raw description
}

// parseResArgs reads [dev DEV | link DEV[/PORT|/-]] and FILTER VALUE pairs.
func parseResArgs(args *argv, o *resObject) (resSelection, error) {
	var sel resSelection
	keys := []string{"dev", "link"}
	for _, f := range o.filters {
		keys = append(keys, f.key)
	}
	seen := map[string]bool{}
	for !args.empty() {
		key, err := args.keyword("filter", "", keys...)
		if err != nil {
			return sel, err
		}
		value, err := args.value(key + " value")
		if err != nil {
			return sel, err
		}
		if seen[key] || (key == "dev" || key == "link") && (seen["dev"] || seen["link"]) {
			return sel, usagef(args.help, "%s given twice", key)
		}
		seen[key] = true
		switch key {
		case "dev", "link":
			if sel, err = parseResLocation(args, o, key, value, sel); err != nil {
				return sel, err
			}
			continue
		}
		for i := range o.filters {
			if o.filters[i].key == key {
				f, err := parseFilter(args.help, &o.filters[i], value)
				if err != nil {
					return sel, err
				}
				sel.filters = append(sel.filters, f)
			}
		}
	}
	return sel, nil
}

// parseResLocation reads the device (and port) of dev DEV / link DEV/PORT.
func parseResLocation(args *argv, o *resObject, key, value string, sel resSelection) (resSelection, error) {
	if dev, ok := strings.CutSuffix(value, "/-"); ok && key == "link" {
		if !o.typ.PerPort() {
			return sel, usagef(args.help, "%s objects have no port: use dev %s", o.typ, dev)
		}
		if dev == "" {
			return sel, usagef(args.help, "missing device name in %q", value)
		}
		sel.dev, sel.portless = dev, true
		return sel, nil
	}
	dp, err := args.parseDevPort(value)
	if err != nil {
		return sel, err
	}
	if dp.Port != 0 && (key == "dev" || !o.typ.PerPort()) {
		return sel, usagef(args.help, "%s objects belong to a device, not a port: use dev %s", o.typ, dp.Dev)
	}
	sel.dev, sel.port = dp.Dev, dp.Port
	return sel, nil
}

// resSummary prints the object counts of every device, or of one.
func (a *app) resSummary(dev string) error {
	c, err := a.nl()
	if err != nil {
		return err
	}
	sums, err := c.ResSummaries()
	if err != nil {
		return err
	}
	if dev != "" {
		i := slices.IndexFunc(sums, func(s nldev.ResSummary) bool { return s.DevName == dev })
		if i < 0 {
			var names, objects []string
			for _, s := range sums {
				names = append(names, s.DevName)
			}
			for _, o := range resObjects {
				objects = append(objects, o.typ.String())
			}
			return usagef("grdma res help", "%q is neither an object (%s) nor an RDMA device (%s)",
				dev, strings.Join(objects, ", "), strings.Join(names, ", "))
		}
		sums = sums[i : i+1]
	}
	// The dump counts no driver-internal objects; -dd asks device by device.
	if a.opts.details >= 2 {
		for i := range sums {
			if sums[i], err = c.ResSummary(sums[i].DevIndex, true); err != nil {
				return err
			}
		}
	}
	rp := resPrinter{p: a.printer()}
	rp.p.StartList()
	for i := range sums {
		rp.summary(&sums[i])
	}
	rp.p.EndList()
	return rp.p.Flush()
}

// resShow lists the objects of one kind.
func (a *app) resShow(o *resObject, sel resSelection) error {
	c, devs, err := a.devices()
	if err != nil {
		return err
	}
	if sel.dev != "" {
		d, err := nldev.FindDevice(devs, sel.dev)
		if err != nil {
			return err
		}
		if sel.port > d.NumPorts {
			return fmt.Errorf("RDMA device %s has no port %d (it has %d)", d.Name, sel.port, d.NumPorts)
		}
		devs = []nldev.Device{d}
	}
	rp := &resPrinter{p: a.printer(), comm: a.procComm(), driverDetails: a.opts.details >= 2}
	var id *filter
	for i := range sel.filters {
		f := &sel.filters[i]
		switch {
		case f.spec.qpList:
			rp.srqQPs = f
		case f.spec.id:
			id = f
		}
	}
	rp.p.StartList()
	for _, d := range devs {
		q := nldev.ResQuery{Dev: d.Index, Port: sel.port, DriverDetails: rp.driverDetails}
		if err = resShowDevice(c, o, sel, q, id, rp); err != nil {
			if sel.dev == "" && vanished(c, d, err) {
				err = nil
				continue
			}
			break
		}
	}
	rp.p.EndList()
	if ferr := rp.p.Flush(); err == nil {
		err = ferr
	}
	return err
}

// resShowDevice lists the objects of one device.
func resShowDevice(c *nldev.Client, o *resObject, sel resSelection, q nldev.ResQuery, id *filter, rp *resPrinter) error {
	n, single := uint32(0), false
	if id != nil {
		n, single = id.singleID()
	}
	// QPs and CM IDs are looked up on a port. The kernel numbers the
	// special QPs 0 and 1 (SMI, GSI) differently from their QPN.
	single = single && (!o.typ.PerPort() || q.Port != 0) && !(o.typ == nldev.ResQP && n <= 1)
	if sel.raw {
		if single {
			e, err := c.ResGetRaw(o.typ, q, n)
			if err == nil {
				rp.rawEntry(o.typ, &e)
			}
			return ignoreMissing(err)
		}
		return c.ResDumpRaw(o.typ, q, func(e *nldev.RawEntry) error {
			if !sel.portless || !e.Has(nldev.AttrPortIndex) {
				rp.rawEntry(o.typ, e)
			}
			return nil
		})
	}
	obj := o.newObj()
	emit := func() error {
		if sel.portless && obj.Res().Has(nldev.AttrPortIndex) {
			return nil
		}
		for i := range sel.filters {
			if !sel.filters[i].match(obj, rp.comm) {
				return nil
			}
		}
		o.render(rp, obj)
		return nil
	}
	if single {
		err := c.ResGet(q, n, obj)
		if err == nil {
			return emit()
		}
		if err = ignoreMissing(err); err == nil {
			return nil
		}
		// Older kernels have no lookup by number: dump instead, as rdma
		// does.
	}
	if sel.portless {
		return c.ResDump(q, obj, emit)
	}
	return c.ResDumpPortOrder(q, obj, emit)
}

// ignoreMissing drops the errors of a lookup by number that mean "no such
// object here": ENOENT, or EAGAIN for a QP on another port.
func ignoreMissing(err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EAGAIN) {
		return nil
	}
	return err
}

// procComm returns a cached /proc/PID/comm reader (below --sysfs-root):
// objects of one process share a name, and there may be many.
func (a *app) procComm() commLookup {
	type entry struct {
		name string
		ok   bool
	}
	cache := map[uint32]entry{}
	return func(pid uint32) (string, bool) {
		if e, hit := cache[pid]; hit {
			return e.name, e.ok
		}
		var e entry
		if fsys, err := a.rootFS(); err == nil && pid != 0 {
			if b, err := fsys.ReadFile("proc/" + strconv.FormatUint(uint64(pid), 10) + "/comm"); err == nil {
				e.name, e.ok = strings.TrimSuffix(string(b), "\n"), true
			}
		}
		if len(cache) > 4096 {
			clear(cache)
		}
		cache[pid] = e
		return e.name, e.ok
	}
}
