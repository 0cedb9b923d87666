package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/output"
)

// Renderers of `res show` objects, field by field in the order of rdma's
// rdma/res-*.c; a field the kernel did not send is not printed.

// resPrinter prints resource objects with what every line needs.
type resPrinter struct {
	p             *output.Printer
	comm          nldev.CommFunc
	driverDetails bool             // -dd: print the driver's attributes
	srqQPs        *nldev.ResFilter // the SRQ lqpn filter, if given
	ranges        []string         // scratch for SRQ QP lists
	raw           []byte           // scratch for raw data text
}

// maxCommField is what rdma's 18-byte buffer keeps of comm (brackets
// included in text).
const maxCommField = 17

func (rp *resPrinter) owner(r *nldev.Resource) {
	name, ok := nldev.OwnerName(r, rp.comm)
	if !ok {
		return
	}
	if !r.Has(nldev.AttrResPID) && !rp.p.JSON() {
		name = "[" + name + "]"
	}
	if len(name) > maxCommField {
		name = name[:maxCommField]
	}
	rp.p.String(output.Any, "comm", "comm %s ", name)
}

// dev prints "dev NAME " (print_dev).
func (rp *resPrinter) dev(r *nldev.Resource) {
	rp.p.Uint(output.JSONOnly, "ifindex", "", uint64(r.DevIndex))
	rp.p.String(output.Any, "ifname", "dev %s ", r.DevName)
}

// link prints "link NAME/PORT " or, for an object on no port,
// "link NAME/- " (print_link).
func (rp *resPrinter) link(r *nldev.Resource) {
	rp.p.Uint(output.JSONOnly, "ifindex", "", uint64(r.DevIndex))
	rp.p.String(output.JSONOnly, "ifname", "", r.DevName)
	port := "-"
	if r.Has(nldev.AttrPortIndex) {
		rp.p.Uint(output.JSONOnly, "port", "", uint64(r.Port))
		port = strconv.FormatUint(uint64(r.Port), 10)
	}
	rp.p.Text("link " + r.DevName + "/" + port + " ")
}

// num prints "name value " when the kernel sent the attribute.
func (rp *resPrinter) num(r *nldev.Resource, attr nldev.Attr, name string, v uint64) {
	if r.Has(attr) {
		rp.p.Uint(output.Any, name, name+" %s ", v)
	}
}

// key prints a key: text "name 0xHEX ", JSON hex digits as a string.
func (rp *resPrinter) key(r *nldev.Resource, attr nldev.Attr, name string, v uint64) {
	if r.Has(attr) {
		rp.p.String(output.Any, name, name+" 0x%s ", strconv.FormatUint(v, 16))
	}
}

// str prints "name value " when the kernel sent the attribute.
func (rp *resPrinter) str(r *nldev.Resource, attr nldev.Attr, name, v string) {
	if r.Has(attr) {
		rp.p.String(output.Any, name, name+" %s ", v)
	}
}

// end closes one object's line: comm, driver attributes, newline.
func (rp *resPrinter) end(r *nldev.Resource) {
	rp.owner(r)
	rp.driver(r)
	rp.p.CloseObject()
	rp.p.Newline()
}

// maxDriverLine is where rdma wraps driver attributes (MAX_LINE_LENGTH).
const maxDriverLine = 80

// driver prints the driver's attributes (-dd) as rdma's
// print_driver_table does: text "drv_KEY VALUE " on a continuation line,
// wrapped after 80 columns of numbers. Unlike rdma, JSON numbers keep
// their sign and 64 bits.
func (rp *resPrinter) driver(r *nldev.Resource) {
	if !rp.driverDetails || !r.Has(nldev.AttrDriver) {
		return
	}
	p := rp.p
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

// object prints one object of any type.
func (rp *resPrinter) object(o nldev.ResObject) {
	switch o := o.(type) {
	case *nldev.QP:
		rp.qp(o)
	case *nldev.CMID:
		rp.cmID(o)
	case *nldev.CQ:
		rp.cq(o)
	case *nldev.MR:
		rp.mr(o)
	case *nldev.PD:
		rp.pd(o)
	case *nldev.Ctx:
		rp.ctx(o)
	case *nldev.SRQ:
		rp.srq(o)
	}
}

func (rp *resPrinter) qp(q *nldev.QP) {
	r := &q.Resource
	rp.p.OpenObject("")
	rp.link(r)
	rp.num(r, nldev.AttrResLQPN, "lqpn", uint64(q.LQPN))
	rp.num(r, nldev.AttrResRQPN, "rqpn", uint64(q.RQPN))
	rp.str(r, nldev.AttrResType, "type", q.Type.String())
	if q.Type == nldev.QPTypeDriver {
		rp.str(r, nldev.AttrResSubtype, "subtype", q.Subtype)
	}
	rp.str(r, nldev.AttrResState, "state", q.State.String())
	rp.num(r, nldev.AttrResRQPSN, "rq-psn", uint64(q.RQPSN))
	rp.num(r, nldev.AttrResSQPSN, "sq-psn", uint64(q.SQPSN))
	rp.str(r, nldev.AttrResPathMigState, "path-mig-state", q.PathMigState.String())
	rp.num(r, nldev.AttrResPDN, "pdn", uint64(q.PDN))
	rp.num(r, nldev.AttrResPID, "pid", uint64(r.PID))
	rp.end(r)
}

func (rp *resPrinter) cmID(c *nldev.CMID) {
	r := &c.Resource
	rp.p.OpenObject("")
	rp.link(r)
	rp.num(r, nldev.AttrResCMIDN, "cm-idn", uint64(c.ID))
	rp.num(r, nldev.AttrResLQPN, "lqpn", uint64(c.LQPN))
	rp.str(r, nldev.AttrResType, "qp-type", c.QPType.String())
	rp.str(r, nldev.AttrResState, "state", c.State.String())
	rp.str(r, nldev.AttrResPS, "ps", c.PS.RdmaName())
	rp.num(r, nldev.AttrResPID, "pid", uint64(r.PID))
	rp.owner(r)
	// Addresses other than IPv4/IPv6 (AF_IB) are left out; rdma drops
	// the whole line then.
	if a := c.SrcAddr; r.Has(nldev.AttrResSrcAddr) && a.IsValid() {
		rp.p.String(output.Any, "src-addr", "src-addr %s ", a.Addr().String()+":"+strconv.Itoa(int(a.Port())))
	}
	if a := c.DstAddr; r.Has(nldev.AttrResDstAddr) && a.IsValid() {
		rp.p.String(output.Any, "dst-addr", "dst-addr %s ", a.Addr().String()+":"+strconv.Itoa(int(a.Port())))
	}
	rp.driver(r)
	rp.p.CloseObject()
	rp.p.Newline()
}

func (rp *resPrinter) cq(c *nldev.CQ) {
	r := &c.Resource
	rp.p.OpenObject("")
	rp.dev(r)
	rp.num(r, nldev.AttrResCQN, "cqn", uint64(c.CQN))
	rp.num(r, nldev.AttrResCQE, "cqe", uint64(c.CQE))
	rp.num(r, nldev.AttrResUseCnt, "users", c.Users)
	rp.str(r, nldev.AttrResPollCtx, "poll-ctx", c.PollCtx.RdmaName())
	if r.Has(nldev.AttrDevDIM) && c.DIM <= 1 {
		rp.p.OnOff(output.Any, "adaptive-moderation", "adaptive-moderation %s ", c.DIM == 1)
	}
	rp.num(r, nldev.AttrResCtxN, "ctxn", uint64(c.CtxN))
	rp.num(r, nldev.AttrResPID, "pid", uint64(r.PID))
	rp.end(r)
}

func (rp *resPrinter) mr(m *nldev.MR) {
	r := &m.Resource
	rp.p.OpenObject("")
	rp.dev(r)
	rp.num(r, nldev.AttrResMRN, "mrn", uint64(m.MRN))
	rp.key(r, nldev.AttrResRKey, "rkey", uint64(m.RKey))
	rp.key(r, nldev.AttrResLKey, "lkey", uint64(m.LKey))
	rp.key(r, nldev.AttrResIOVA, "iova", m.IOVA)
	rp.num(r, nldev.AttrResMRLen, "mrlen", m.Len)
	rp.num(r, nldev.AttrResPDN, "pdn", uint64(m.PDN))
	rp.num(r, nldev.AttrResPID, "pid", uint64(r.PID))
	rp.end(r)
}

func (rp *resPrinter) pd(d *nldev.PD) {
	r := &d.Resource
	rp.p.OpenObject("")
	rp.dev(r)
	rp.num(r, nldev.AttrResPDN, "pdn", uint64(d.PDN))
	rp.key(r, nldev.AttrResLocalDMALKey, "local_dma_lkey", uint64(d.LocalDMALKey))
	rp.num(r, nldev.AttrResUseCnt, "users", d.Users)
	rp.key(r, nldev.AttrResUnsafeGlobalRKey, "unsafe_global_rkey", uint64(d.UnsafeGlobalRKey))
	rp.num(r, nldev.AttrResCtxN, "ctxn", uint64(d.CtxN))
	rp.num(r, nldev.AttrResPID, "pid", uint64(r.PID))
	rp.end(r)
}

func (rp *resPrinter) ctx(c *nldev.Ctx) {
	r := &c.Resource
	rp.p.OpenObject("")
	rp.dev(r)
	rp.num(r, nldev.AttrResCtxN, "ctxn", uint64(c.CtxN))
	rp.num(r, nldev.AttrResPID, "pid", uint64(r.PID))
	rp.end(r)
}

// srqQPList renders the SRQ's QPs as rdma does ("125-128,130"), keeping
// only those the lqpn filter selects; ok is false when a filter leaves
// none (rdma then hides the SRQ). Unlike rdma, the list is not cut at
// 256 characters.
func (rp *resPrinter) srqQPList(s *nldev.SRQ) (list []string, ok bool) {
	rp.ranges = rp.ranges[:0]
	f := rp.srqQPs
	for _, qr := range s.QPs {
		if f == nil {
			rp.ranges = append(rp.ranges, formatQPRange(qr.First, qr.Last))
			continue
		}
		// The runs of numbers the filter keeps.
		for _, fr := range f.Numbers {
			lo, hi := max(uint64(qr.First), fr.Lo), min(uint64(qr.Last), fr.Hi)
			if lo <= hi {
				rp.ranges = append(rp.ranges, formatQPRange(uint32(lo), uint32(hi)))
			}
		}
	}
	return rp.ranges, f == nil || len(rp.ranges) > 0
}

func formatQPRange(first, last uint32) string {
	if first == last {
		return strconv.FormatUint(uint64(first), 10)
	}
	return strconv.FormatUint(uint64(first), 10) + "-" + strconv.FormatUint(uint64(last), 10)
}

func (rp *resPrinter) srq(s *nldev.SRQ) {
	qps, ok := rp.srqQPList(s)
	if !ok {
		return
	}
	r := &s.Resource
	rp.p.OpenObject("")
	rp.dev(r)
	rp.num(r, nldev.AttrResSRQN, "srqn", uint64(s.SRQN))
	rp.str(r, nldev.AttrResType, "type", s.Type.String())
	if len(qps) > 0 {
		rp.p.OpenArray(output.Any, "lqpn", "lqpn ")
		for i, q := range qps {
			if i > 0 {
				rp.p.Text(",")
			}
			rp.p.String(output.Any, "", "%s", q)
		}
		rp.p.CloseArray(output.Any, " ")
	}
	rp.num(r, nldev.AttrResPDN, "pdn", uint64(s.PDN))
	rp.num(r, nldev.AttrResCQN, "cqn", uint64(s.CQN))
	rp.num(r, nldev.AttrResPID, "pid", uint64(r.PID))
	rp.end(r)
}

// rawEntry prints one object of a _RAW dump. JSON is rdma's ("data": an
// array of byte values); text differs on purpose: rdma runs the decimal
// bytes together ("1490...>"), grdma writes "data" and hex bytes
// separated by spaces.
func (rp *resPrinter) rawEntry(t nldev.ResType, e *nldev.RawEntry) {
	r := &e.Resource
	rp.p.OpenObject("")
	if t.PerPort() {
		rp.link(r)
	} else {
		rp.dev(r)
	}
	rp.p.OpenArray(output.JSONOnly, "data", "")
	for _, b := range e.Data {
		rp.p.Uint(output.JSONOnly, "", "", uint64(b))
	}
	rp.p.CloseArray(output.JSONOnly, "")
	if !rp.p.JSON() {
		const hex = "0123456789abcdef"
		rp.raw = append(rp.raw[:0], "data"...)
		for _, b := range e.Data {
			rp.raw = append(rp.raw, ' ', hex[b>>4], hex[b&0xf])
		}
		rp.raw = append(rp.raw, ' ')
		rp.p.Text(string(rp.raw))
	}
	rp.p.CloseObject()
	rp.p.Newline()
}

// summary prints one device's object counts (rdma res show).
func (rp *resPrinter) summary(s *nldev.ResSummary) {
	rp.p.OpenObject("")
	rp.p.Uint(output.Any, "ifindex", "%s: ", uint64(s.DevIndex))
	rp.p.String(output.Any, "ifname", "%s: ", s.DevName)
	for _, c := range s.Counts {
		rp.p.Uint(output.Any, c.Name, strings.ReplaceAll(c.Name, "%", "%%")+" %s ", c.Curr)
	}
	rp.p.CloseObject()
	rp.p.Newline()
}
