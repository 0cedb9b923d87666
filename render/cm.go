package render

import (
	"github.com/grdma/grdma/cmconfig"
	"github.com/grdma/grdma/output"
)

// CMDefaults prints the RDMA CM's defaults of each port as grdma cm show
// does: text "cm rxe0/1 roce-mode v2 tos 0", in cm set's words; JSON a
// list of objects with ifname, port, roce_mode ("RoCE v2", as gid show's
// type) and tos.
func CMDefaults(p *output.Printer, defs []cmconfig.Defaults) {
	p.StartList()
	for _, d := range defs {
		p.OpenObject("")
		p.String(output.Any, "ifname", "cm %s/", d.Device)
		p.Uint(output.Any, "port", "%s ", uint64(d.Port))
		p.String(output.TextOnly, "", "roce-mode %s ", d.RoCEMode.Version())
		p.String(output.JSONOnly, "roce_mode", "", d.RoCEMode.String())
		p.Uint(output.Any, "tos", "tos %s", uint64(d.ToS))
		p.CloseObject()
		if !p.JSON() {
			p.Newline()
		}
	}
	p.EndList()
}
