package render

import (
	"fmt"
	"strings"
	"time"

	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/output"
)

// counterLines prints counters as rdma's res_get_hwcounters does:
// "name value" on a continuation line each (JSON: name: value).
func counterLines(p *output.Printer, counters []nldev.Counter) {
	for _, ctr := range counters {
		p.Text(p.SL() + "    ")
		p.Uint(output.JSONOnly, ctr.Name, "", ctr.Value)
		p.Text(fmt.Sprintf("%s %d ", ctr.Name, ctr.Value))
	}
}

// Counters prints one port's counters as rdma statistic show does
// (rdma/stat.c): the link, then one "name value" per line. No ifindex in
// JSON, as in rdma.
func Counters(p *output.Printer, pc *nldev.PortCounters) {
	p.OpenObject("")
	p.String(output.Any, "ifname", "link %s/", pc.Device)
	p.Uint(output.Any, "port", "%s ", uint64(pc.Port))
	counterLines(p, pc.Counters)
	p.CloseObject()
	p.Newline()
}

// Rates prints one port's per-second counter rates over secs seconds,
// sampled at at (grdma stat show -i): a text block, or one JSON object
// on a line of its own (JSON lines, for streaming) with the time.
func Rates(p *output.Printer, cur *nldev.PortCounters, rates []nldev.Rate, at time.Time, secs float64) {
	p.StartPlain()
	p.OpenObject("")
	p.String(output.JSONOnly, "time", "", at.UTC().Format(time.RFC3339Nano))
	p.String(output.Any, "ifname", "link %s/", cur.Device)
	p.Uint(output.Any, "port", "%s ", uint64(cur.Port))
	p.Float(output.Any, "interval", "interval %ss ", secs, 3)
	for _, r := range rates {
		p.Text(p.SL() + "    ")
		p.Float(output.Any, r.Name, r.Name+" %s/s ", r.PerSecond, 1)
	}
	p.CloseObject()
	p.EndPlain() // ends the JSON line
	if !p.JSON() {
		p.Newline()
	}
}

// OptionalCounters prints a port's optional counters (enabled ones, or
// with supported all of them) as rdma statistic mode does; a port without
// any prints nothing.
func OptionalCounters(p *output.Printer, st *nldev.PortCounters, supported bool) {
	key := "optional-counters"
	if supported {
		key = "supported optional-counters"
	}
	first := true
	for _, ctr := range st.Counters {
		if !ctr.Optional || !(supported || ctr.Enabled) {
			continue
		}
		if first {
			p.OpenObject("")
			p.String(output.Any, "ifname", "link %s/", st.Device)
			p.Uint(output.Any, "port", "%s ", uint64(st.Port))
			p.OpenArray(output.Any, key, key)
			p.Text(" ")
			first = false
		} else {
			p.Text(",")
		}
		p.Text(p.SL() + "    ")
		p.String(output.Any, "", "%s", ctr.Name)
	}
	if !first {
		p.CloseArray(output.JSONOnly, "")
		p.CloseObject()
		p.Newline()
	}
}

// MRCounters prints an MR's counters as rdma statistic mr does
// (stat_mr_line in rdma/stat-mr.c).
func MRCounters(p *output.Printer, m *nldev.MRCounters) {
	p.OpenObject("")
	devField(p, m.DevIndex, m.Device)
	if m.Has(nldev.AttrResMRN) {
		p.Uint(output.Any, "mrn", "mrn %s ", uint64(m.MRN))
	}
	counterLines(p, m.Counters)
	p.CloseObject()
	p.Newline()
}

// QPCounterMode prints a port's QP counter mode as rdma statistic qp
// mode does.
func QPCounterMode(p *output.Printer, m *nldev.QPCounterMode) {
	p.OpenObject("")
	linkField(p, m.DevIndex, m.Device, m.Port, true)
	p.String(output.Any, "mode", "mode %s ", qpModeString(m))
	p.CloseObject()
	p.Newline()
}

// qpModeString is rdma's free-text mode: "qp auto type,pid on
// optional-counters off" in auto mode, "qp auto off" otherwise (rdma does
// not tell manual mode from none; neither can a script that parses this).
func qpModeString(m *nldev.QPCounterMode) string {
	if m.Mode != nldev.CounterModeAuto {
		return "qp auto off"
	}
	var crit []string
	if m.AutoMask&nldev.CounterMaskQPType != 0 {
		crit = append(crit, "type")
	}
	if m.AutoMask&nldev.CounterMaskPID != 0 {
		crit = append(crit, "pid")
	}
	if len(crit) == 0 {
		return "qp auto off"
	}
	opt := "off"
	if m.OptionalCounters {
		opt = "on"
	}
	return "qp auto " + strings.Join(crit, ",") + " on optional-counters " + opt
}

// FRMRPool prints a pool as rdma resource show frmr_pools does
// (res_frmr_pools_line in rdma/res-frmr-pools.c); details (-d) adds the
// key's fields.
func FRMRPool(p *output.Printer, fp *nldev.FRMRPool, details bool) {
	p.OpenObject("")
	devField(p, fp.DevIndex, fp.Device)
	num := func(has bool, name string, v uint64) {
		if has {
			p.Uint(output.Any, name, name+" %s ", v)
		}
	}
	if k := &fp.Key; fp.Has(nldev.AttrFRMRPoolKey) {
		p.String(output.Any, "key", "key %s ", k.String())
		if details {
			ats := uint64(0)
			if k.ATS {
				ats = 1
			}
			num(k.Has(nldev.AttrFRMRPoolKeyATS), "ats", ats)
			num(k.Has(nldev.AttrFRMRPoolKeyAccessFlags), "access_flags", uint64(k.AccessFlags))
			num(k.Has(nldev.AttrFRMRPoolKeyVendorKey), "vendor_key", k.VendorKey)
			num(k.Has(nldev.AttrFRMRPoolKeyNumDMABlocks), "num_dma_blocks", k.NumDMABlocks)
			num(k.Has(nldev.AttrFRMRPoolKeyKernelVendorKey), "kernel_vendor_key", k.KernelVendorKey)
		}
	}
	num(fp.Has(nldev.AttrFRMRPoolQueueHandles), "queue", uint64(fp.Queue))
	num(fp.Has(nldev.AttrFRMRPoolInUse), "in_use", fp.InUse)
	num(fp.Has(nldev.AttrFRMRPoolMaxInUse), "max_in_use", fp.MaxInUse)
	num(fp.Has(nldev.AttrFRMRPoolPinnedHandles), "pinned", uint64(fp.Pinned))
	p.CloseObject()
	p.Newline()
}
