package render

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/output"
)

// Renderers of `res show` objects, field by field in the order of rdma's
// rdma/res-*.c; a field the kernel did not send is not printed.

// ResOptions are what resource objects need printed besides the object.
type ResOptions struct {
	// Comm names the process of a user object (nldev.OwnerName); nil
	// prints no comm for them.
	Comm nldev.CommFunc
	// DriverDetails prints the driver's attributes (drv_*), as -dd does.
	DriverDetails bool
	// SRQQPs is the lqpn filter of a listing of SRQs
	// (nldev.ResSelect.QPList): an SRQ lists only the QPs it selects, and
	// is left out when it selects none.
	SRQQPs *nldev.ResFilter
}

// Resources prints resource objects as rdma resource show does. One
// Resources serves a whole listing: it keeps its scratch buffers.
type Resources struct {
	p      *output.Printer
	o      ResOptions
	ranges []string // scratch for SRQ QP lists
	raw    []byte   // scratch for raw data text
}

// NewResources returns a Resources printing on p.
func NewResources(p *output.Printer, o ResOptions) *Resources {
	return &Resources{p: p, o: o}
}

// ResSummary prints one device's object counts as rdma resource show
// does.
func ResSummary(p *output.Printer, s *nldev.ResSummary) {
	p.OpenObject("")
	p.Uint(output.Any, "ifindex", "%s: ", uint64(s.DevIndex))
	p.String(output.Any, "ifname", "%s: ", s.Device)
	for _, c := range s.Counts {
		p.Uint(output.Any, c.Name, strings.ReplaceAll(c.Name, "%", "%%")+" %s ", c.Curr)
	}
	p.CloseObject()
	p.Newline()
}

// maxCommField is what rdma's 18-byte buffer keeps of comm (brackets
// included in text).
const maxCommField = 17

func (rs *Resources) owner(r *nldev.Resource) {
	name, ok := nldev.OwnerName(r, rs.o.Comm)
	if !ok {
		return
	}
	if !r.Has(nldev.AttrResPID) && !rs.p.JSON() {
		name = "[" + name + "]"
	}
	if len(name) > maxCommField {
		name = name[:maxCommField]
	}
	rs.p.String(output.Any, "comm", "comm %s ", name)
}

// devField prints "dev NAME ", JSON ifindex and ifname (print_dev).
func devField(p *output.Printer, index uint32, name string) {
	p.Uint(output.JSONOnly, "ifindex", "", uint64(index))
	p.String(output.Any, "ifname", "dev %s ", name)
}

// linkField prints "link NAME/PORT " or, for an object on no port
// (hasPort false), "link NAME/- " (print_link).
func linkField(p *output.Printer, index uint32, name string, port uint32, hasPort bool) {
	p.Uint(output.JSONOnly, "ifindex", "", uint64(index))
	p.String(output.JSONOnly, "ifname", "", name)
	text := "-"
	if hasPort {
		p.Uint(output.JSONOnly, "port", "", uint64(port))
		text = strconv.FormatUint(uint64(port), 10)
	}
	p.Text("link " + name + "/" + text + " ")
}

func (rs *Resources) dev(r *nldev.Resource) { devField(rs.p, r.DevIndex, r.Device) }

func (rs *Resources) link(r *nldev.Resource) {
	linkField(rs.p, r.DevIndex, r.Device, r.Port, r.Has(nldev.AttrPortIndex))
}

// num prints "name value " when the kernel sent the attribute.
func (rs *Resources) num(r *nldev.Resource, attr nldev.Attr, name string, v uint64) {
	if r.Has(attr) {
		rs.p.Uint(output.Any, name, name+" %s ", v)
	}
}

// key prints a key: text "name 0xHEX ", JSON hex digits as a string.
func (rs *Resources) key(r *nldev.Resource, attr nldev.Attr, name string, v uint64) {
	if r.Has(attr) {
		rs.p.String(output.Any, name, name+" 0x%s ", strconv.FormatUint(v, 16))
	}
}

// str prints "name value " when the kernel sent the attribute.
func (rs *Resources) str(r *nldev.Resource, attr nldev.Attr, name, v string) {
	if r.Has(attr) {
		rs.p.String(output.Any, name, name+" %s ", v)
	}
}

// end closes one object's line: comm, driver attributes, newline.
func (rs *Resources) end(r *nldev.Resource) {
	rs.owner(r)
	rs.driver(r)
	rs.p.CloseObject()
	rs.p.Newline()
}

// maxDriverLine is where rdma wraps driver attributes (MAX_LINE_LENGTH).
const maxDriverLine = 80

// driver prints the driver's attributes (-dd) as rdma's
// print_driver_table does: text "drv_KEY VALUE " on a continuation line,
// wrapped after 80 columns of numbers. Unlike rdma, JSON numbers keep
// their sign and 64 bits.
func (rs *Resources) driver(r *nldev.Resource) {
	if !rs.o.DriverDetails || !r.Has(nldev.AttrDriver) {
		return
	}
	p := rs.p
	p.Text(p.SL() + "    ")
	width := 0
	for _, d := range r.Driver {
		if width > maxDriverLine {
			p.Text(p.SL() + "    ")
			width = 0
		}
		key := "drv_" + d.Key
		if d.Kind == nldev.AttrDriverString {
			p.String(output.Any, key, key+" %s ", d.Str)
			continue // rdma does not count strings towards the width
		}
		var text string
		switch {
		case d.Hex && (d.Kind == nldev.AttrDriverS32 || d.Kind == nldev.AttrDriverU32):
			text = fmt.Sprintf("%s 0x%x ", key, uint32(d.Num))
		case d.Hex:
			text = fmt.Sprintf("%s 0x%x ", key, d.Num)
		case d.Kind == nldev.AttrDriverS32 || d.Kind == nldev.AttrDriverS64:
			text = fmt.Sprintf("%s %d ", key, d.Int())
		default:
			text = fmt.Sprintf("%s %d ", key, d.Num)
		}
		if d.Kind == nldev.AttrDriverS32 || d.Kind == nldev.AttrDriverS64 {
			p.Int(output.JSONOnly, key, "", d.Int())
		} else {
			p.Uint(output.JSONOnly, key, "", d.Num)
		}
		p.Text(text)
		if !p.JSON() {
			width += len(text)
		}
	}
}

// Object prints one object of any type, as rdma resource show TYPE
// prints it.
func (rs *Resources) Object(o nldev.ResObject) {
	switch o := o.(type) {
	case *nldev.QP:
		rs.qp(o)
	case *nldev.CMID:
		rs.cmID(o)
	case *nldev.CQ:
		rs.cq(o)
	case *nldev.MR:
		rs.mr(o)
	case *nldev.PD:
		rs.pd(o)
	case *nldev.Ctx:
		rs.ctx(o)
	case *nldev.SRQ:
		rs.srq(o)
	}
}

func (rs *Resources) qp(q *nldev.QP) {
	r := &q.Resource
	rs.p.OpenObject("")
	rs.link(r)
	rs.num(r, nldev.AttrResLQPN, "lqpn", uint64(q.LQPN))
	rs.num(r, nldev.AttrResRQPN, "rqpn", uint64(q.RQPN))
	rs.str(r, nldev.AttrResType, "type", q.Type.String())
	if q.Type == ib.QPTypeDriver {
		rs.str(r, nldev.AttrResSubtype, "subtype", q.Subtype)
	}
	rs.str(r, nldev.AttrResState, "state", q.State.String())
	rs.num(r, nldev.AttrResRQPSN, "rq-psn", uint64(q.RQPSN))
	rs.num(r, nldev.AttrResSQPSN, "sq-psn", uint64(q.SQPSN))
	rs.str(r, nldev.AttrResPathMigState, "path-mig-state", q.PathMigState.String())
	rs.num(r, nldev.AttrResPDN, "pdn", uint64(q.PDN))
	rs.num(r, nldev.AttrResPID, "pid", uint64(r.PID))
	rs.end(r)
}

func (rs *Resources) cmID(c *nldev.CMID) {
	r := &c.Resource
	rs.p.OpenObject("")
	rs.link(r)
	rs.num(r, nldev.AttrResCMIDN, "cm-idn", uint64(c.ID))
	rs.num(r, nldev.AttrResLQPN, "lqpn", uint64(c.LQPN))
	rs.str(r, nldev.AttrResType, "qp-type", c.QPType.String())
	rs.str(r, nldev.AttrResState, "state", c.State.String())
	rs.str(r, nldev.AttrResPS, "ps", c.PS.RdmaName())
	rs.num(r, nldev.AttrResPID, "pid", uint64(r.PID))
	rs.owner(r)
	// Addresses other than IPv4/IPv6 (AF_IB) are left out; rdma drops
	// the whole line then.
	if a := c.SrcAddr; r.Has(nldev.AttrResSrcAddr) && a.IsValid() {
		rs.p.String(output.Any, "src-addr", "src-addr %s ", a.Addr().String()+":"+strconv.Itoa(int(a.Port())))
	}
	if a := c.DstAddr; r.Has(nldev.AttrResDstAddr) && a.IsValid() {
		rs.p.String(output.Any, "dst-addr", "dst-addr %s ", a.Addr().String()+":"+strconv.Itoa(int(a.Port())))
	}
	rs.driver(r)
	rs.p.CloseObject()
	rs.p.Newline()
}

func (rs *Resources) cq(c *nldev.CQ) {
	r := &c.Resource
	rs.p.OpenObject("")
	rs.dev(r)
	rs.num(r, nldev.AttrResCQN, "cqn", uint64(c.CQN))
	rs.num(r, nldev.AttrResCQE, "cqe", uint64(c.CQE))
	rs.num(r, nldev.AttrResUseCnt, "users", c.Users)
	rs.str(r, nldev.AttrResPollCtx, "poll-ctx", c.PollCtx.RdmaName())
	if r.Has(nldev.AttrDevDIM) && c.DIM <= 1 {
		rs.p.OnOff(output.Any, "adaptive-moderation", "adaptive-moderation %s ", c.DIM == 1)
	}
	rs.num(r, nldev.AttrResCtxN, "ctxn", uint64(c.CtxN))
	rs.num(r, nldev.AttrResPID, "pid", uint64(r.PID))
	rs.end(r)
}

func (rs *Resources) mr(m *nldev.MR) {
	r := &m.Resource
	rs.p.OpenObject("")
	rs.dev(r)
	rs.num(r, nldev.AttrResMRN, "mrn", uint64(m.MRN))
	rs.key(r, nldev.AttrResRKey, "rkey", uint64(m.RKey))
	rs.key(r, nldev.AttrResLKey, "lkey", uint64(m.LKey))
	rs.key(r, nldev.AttrResIOVA, "iova", m.IOVA)
	rs.num(r, nldev.AttrResMRLen, "mrlen", m.Len)
	rs.num(r, nldev.AttrResPDN, "pdn", uint64(m.PDN))
	rs.num(r, nldev.AttrResPID, "pid", uint64(r.PID))
	rs.end(r)
}

func (rs *Resources) pd(d *nldev.PD) {
	r := &d.Resource
	rs.p.OpenObject("")
	rs.dev(r)
	rs.num(r, nldev.AttrResPDN, "pdn", uint64(d.PDN))
	rs.key(r, nldev.AttrResLocalDMALKey, "local_dma_lkey", uint64(d.LocalDMALKey))
	rs.num(r, nldev.AttrResUseCnt, "users", d.Users)
	rs.key(r, nldev.AttrResUnsafeGlobalRKey, "unsafe_global_rkey", uint64(d.UnsafeGlobalRKey))
	rs.num(r, nldev.AttrResCtxN, "ctxn", uint64(d.CtxN))
	rs.num(r, nldev.AttrResPID, "pid", uint64(r.PID))
	rs.end(r)
}

func (rs *Resources) ctx(c *nldev.Ctx) {
	r := &c.Resource
	rs.p.OpenObject("")
	rs.dev(r)
	rs.num(r, nldev.AttrResCtxN, "ctxn", uint64(c.CtxN))
	rs.num(r, nldev.AttrResPID, "pid", uint64(r.PID))
	rs.end(r)
}

// srqQPList renders the SRQ's QPs as rdma does ("125-128,130"), keeping
// only those the lqpn filter selects; ok is false when a filter leaves
// none (rdma then hides the SRQ). Unlike rdma, the list is not cut at
// 256 characters.
func (rs *Resources) srqQPList(s *nldev.SRQ) (list []string, ok bool) {
	rs.ranges = rs.ranges[:0]
	f := rs.o.SRQQPs
	for _, qr := range s.QPs {
		if f == nil {
			rs.ranges = append(rs.ranges, formatQPRange(qr.First, qr.Last))
			continue
		}
		// The runs of numbers the filter keeps.
		for _, fr := range f.Numbers {
			lo, hi := max(uint64(qr.First), fr.Lo), min(uint64(qr.Last), fr.Hi)
			if lo <= hi {
				rs.ranges = append(rs.ranges, formatQPRange(uint32(lo), uint32(hi)))
			}
		}
	}
	return rs.ranges, f == nil || len(rs.ranges) > 0
}

func formatQPRange(first, last uint32) string {
	if first == last {
		return strconv.FormatUint(uint64(first), 10)
	}
	return strconv.FormatUint(uint64(first), 10) + "-" + strconv.FormatUint(uint64(last), 10)
}

func (rs *Resources) srq(s *nldev.SRQ) {
	qps, ok := rs.srqQPList(s)
	if !ok {
		return
	}
	r := &s.Resource
	rs.p.OpenObject("")
	rs.dev(r)
	rs.num(r, nldev.AttrResSRQN, "srqn", uint64(s.SRQN))
	rs.str(r, nldev.AttrResType, "type", s.Type.String())
	if len(qps) > 0 {
		rs.p.OpenArray(output.Any, "lqpn", "lqpn ")
		for i, q := range qps {
			if i > 0 {
				rs.p.Text(",")
			}
			rs.p.String(output.Any, "", "%s", q)
		}
		rs.p.CloseArray(output.Any, " ")
	}
	rs.num(r, nldev.AttrResPDN, "pdn", uint64(s.PDN))
	rs.num(r, nldev.AttrResCQN, "cqn", uint64(s.CQN))
	rs.num(r, nldev.AttrResPID, "pid", uint64(r.PID))
	rs.end(r)
}

// Raw prints one object of a _RAW dump (res show -r) of objects of type
// t. JSON is rdma's ("data": an array of byte values); text differs on
// purpose: rdma runs the decimal bytes together ("1490...>"), grdma
// writes "data" and hex bytes separated by spaces.
func (rs *Resources) Raw(t nldev.ResType, e *nldev.RawEntry) {
	r := &e.Resource
	rs.p.OpenObject("")
	if t.PerPort() {
		rs.link(r)
	} else {
		rs.dev(r)
	}
	rs.p.OpenArray(output.JSONOnly, "data", "")
	for _, b := range e.Data {
		rs.p.Uint(output.JSONOnly, "", "", uint64(b))
	}
	rs.p.CloseArray(output.JSONOnly, "")
	if !rs.p.JSON() {
		const hex = "0123456789abcdef"
		rs.raw = append(rs.raw[:0], "data"...)
		for _, b := range e.Data {
			rs.raw = append(rs.raw, ' ', hex[b>>4], hex[b&0xf])
		}
		rs.raw = append(rs.raw, ' ')
		rs.p.Text(string(rs.raw))
	}
	rs.p.CloseObject()
	rs.p.Newline()
}

// QPCounter prints a QP counter as rdma statistic qp show does
// (res_counter_line in rdma/stat.c).
func (rs *Resources) QPCounter(q *nldev.QPCounter) {
	p := rs.p
	p.OpenObject("")
	rs.link(&q.Resource)
	p.Uint(output.Any, "cntn", "cntn %s ", uint64(q.ID))
	rs.str(&q.Resource, nldev.AttrResType, "qp-type", q.QPType.String())
	rs.num(&q.Resource, nldev.AttrResPID, "pid", uint64(q.PID))
	rs.owner(&q.Resource)
	counterLines(p, q.Counters)
	p.OpenArray(output.JSONOnly, "lqpn", "")
	p.Text(p.SL() + "    LQPN: <")
	for i, n := range q.LQPNs {
		if i > 0 {
			p.Text(",")
		}
		p.Uint(output.Any, "", "%s", uint64(n))
	}
	p.CloseArray(output.Any, ">")
	p.CloseObject()
	p.Newline()
}
