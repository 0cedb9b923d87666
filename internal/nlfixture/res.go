package nlfixture

import (
	"fmt"

	"github.com/grdma/grdma/nldev"
	"github.com/mdlayher/netlink"
)

// describeRes fills the fields only resource requests use.
func describeRes(r *Request, ad *netlink.AttributeDecoder) {
	t := nldev.ResTypeOf(r.Cmd)
	if t == 0 && r.Cmd != nldev.CmdResGet {
		return
	}
	switch a := nldev.Attr(ad.Type()); {
	case a == nldev.AttrDriverDetails:
		r.DriverDetails = ad.Uint8() != 0
	case t != 0 && a == t.IDAttr():
		r.HasID, r.ID = true, ad.Uint32()
	}
}

// Recording is one request internal/cmd/nlcapture records, by file name
// (without .bin).
type Recording struct {
	Name string
	Req  Request
}

// ResMissingID is an object number no recording holds, to record the
// kernel's "no such object" reply.
const ResMissingID = 4242

// ResRecordings lists the resource requests recorded for device dev: the
// summary, every dump (plain, -dd, port 1 for QPs and CM IDs, raw), and
// lookups by number: number 0 (QPs: 1, the GSI QP, and 17, the first
// user QP of rxe) and one that does not exist.
func ResRecordings(dev uint32) []Recording {
	d := int64(dev)
	recs := []Recording{
		{fmt.Sprintf("res_get_doit_dev%d", dev), Request{Cmd: nldev.CmdResGet, Dev: d, Port: -1}},
		{fmt.Sprintf("res_get_doit_dev%d_dd", dev), Request{Cmd: nldev.CmdResGet, Dev: d, Port: -1, DriverDetails: true}},
	}
	for _, t := range nldev.ResTypes {
		get, raw := t.Commands()
		name := fmt.Sprintf("res_%s_dump_dev%d", t, dev)
		recs = append(recs,
			Recording{name, Request{Cmd: get, Dump: true, Dev: d, Port: -1}},
			Recording{name + "_dd", Request{Cmd: get, Dump: true, Dev: d, Port: -1, DriverDetails: true}})
		port := int64(-1)
		ids := []uint32{0, ResMissingID}
		if t.PerPort() {
			port = 1
			recs = append(recs, Recording{name + "_port1", Request{Cmd: get, Dump: true, Dev: d, Port: port}})
		}
		if t == nldev.ResQP {
			// The GSI QP (whose restrack number is not its QPN) and the
			// first user QP.
			ids = []uint32{1, 17, ResMissingID}
		}
		if raw != 0 {
			recs = append(recs, Recording{fmt.Sprintf("res_%s_raw_dump_dev%d", t, dev), Request{Cmd: raw, Dump: true, Dev: d, Port: -1}})
		}
		for _, id := range ids {
			recs = append(recs, Recording{fmt.Sprintf("res_%s_doit_dev%d_id%d", t, dev, id),
				Request{Cmd: get, Dev: d, Port: port, HasID: true, ID: id}})
		}
	}
	return recs
}

// ResSummaryDump is the RES_GET dump over all devices.
var ResSummaryDump = Recording{"res_get_dump", Request{Cmd: nldev.CmdResGet, Dump: true, Dev: -1, Port: -1}}

// Res routes the resource recordings of devices 0 and 1 (see
// ResRecordings).
func (k *Kernel) Res() *Kernel {
	k.On(ResSummaryDump.Req, ResSummaryDump.Name+".bin")
	for dev := uint32(0); dev < 2; dev++ {
		for _, r := range ResRecordings(dev) {
			k.On(r.Req, r.Name+".bin")
		}
	}
	return k
}

// ParitySubDevName is the name the recorded NEWDEV request asks for.
const ParitySubDevName = "smi0"

// ParityRecordings lists the requests of the rdma commands recorded for
// device dev, port port (testdata/nldev/parity): MR counters (`rdma stat
// mr`: the dump and lookups of MR 0 and of ResMissingID), a sub-device
// (`rdma dev add smi0 type smi parent DEV`, `rdma dev delete DEV`), the
// FRMR pools dump (`rdma res show frmr_pools`) and the QPs of counter 1
// (`rdma stat qp unbind link DEV/PORT cntn 1`).
func ParityRecordings(dev, port uint32) []Recording {
	d, p := int64(dev), int64(port)
	return []Recording{
		{fmt.Sprintf("stat_mr_dump_dev%d", dev), Request{Cmd: nldev.CmdStatGet, Dump: true, Dev: d, Port: -1, StatMR: true}},
		{fmt.Sprintf("stat_mr_doit_dev%d_id0", dev), Request{Cmd: nldev.CmdStatGet, Dev: d, Port: -1, StatMR: true, HasID: true, ID: 0}},
		{fmt.Sprintf("stat_mr_doit_dev%d_id%d", dev, ResMissingID), Request{Cmd: nldev.CmdStatGet, Dev: d, Port: -1, StatMR: true, HasID: true, ID: ResMissingID}},
		{fmt.Sprintf("newdev_dev%d", dev), Request{Cmd: nldev.CmdNewDev, Dev: d, Port: -1}},
		{fmt.Sprintf("deldev_dev%d", dev), Request{Cmd: nldev.CmdDelDev, Dev: d, Port: -1}},
		{fmt.Sprintf("frmr_pools_dump_dev%d", dev), Request{Cmd: nldev.CmdFRMRPoolsGet, Dump: true, Dev: d, Port: -1}},
		{fmt.Sprintf("stat_qp_counter_dev%d_port%d_id1", dev, port), Request{Cmd: nldev.CmdStatGet, Dev: d, Port: p, HasID: true, ID: 1}},
	}
}

// Parity routes the recordings of ParityRecordings for device 0, port 1.
func (k *Kernel) Parity() *Kernel {
	for _, r := range ParityRecordings(0, 1) {
		k.On(r.Req, r.Name+".bin")
	}
	return k
}
