package render

import (
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/ports"
)

// Port prints one port as grdma port does: text "port rxe0/1 state
// ACTIVE ...", JSON an object with every key, so that scripts need not
// test for them; details (-d) adds max_mtu, mtu_source, netdev_mtu and
// mtu_note to the text.
func Port(p *output.Printer, port *ports.Port, details bool) {
	infiniBand := port.LinkLayer == ib.LinkLayerInfiniBand
	p.OpenObject("")
	p.Uint(output.JSONOnly, "ifindex", "", uint64(port.DevIndex))
	p.String(output.Any, "ifname", "port %s/", port.Device)
	p.Uint(output.Any, "port", "%s ", uint64(port.Port))
	p.String(output.Any, "state", "state %s ", port.State.String())
	p.String(output.Any, "physical_state", "physical_state %s ", port.PhysState.String())
	p.String(output.Any, "link_layer", "link_layer %s ", port.LinkLayer.String())
	p.String(output.Any, "width", "width %s ", port.Width.String())
	p.String(output.Any, "speed", "speed %s ", port.Speed.String())
	decimals := 0
	if port.RateDeciGbps%10 != 0 {
		decimals = 1
	}
	p.Float(output.Any, "rate_gbps", "rate %sGb/s ", port.RateGbps(), decimals)
	p.Uint(output.Any, "active_mtu", "active_mtu %s ", uint64(port.ActiveMTU.Bytes()))
	maxFormat := ""
	if details {
		maxFormat = "max_mtu %s "
	}
	p.Uint(output.Any, "max_mtu", maxFormat, uint64(port.MaxMTU.Bytes()))
	sourceFormat := ""
	if details || port.MTUSource != ports.MTUFromVerbs {
		sourceFormat = "mtu_source %s "
	}
	p.String(output.Any, "mtu_source", sourceFormat, string(port.MTUSource))
	netdevFormat, netdevMTUFormat := "", ""
	if port.Netdev != "" {
		netdevFormat = "netdev %s "
		if details {
			netdevMTUFormat = "netdev_mtu %s "
		}
	}
	p.String(output.Any, "netdev", netdevFormat, port.Netdev)
	if port.NetdevIndex != 0 {
		p.Uint(output.JSONOnly, "netdev_index", "", uint64(port.NetdevIndex))
	}
	p.Uint(output.Any, "netdev_mtu", netdevMTUFormat, uint64(port.NetdevMTU))
	lidFormat, smLIDFormat, lmcFormat := "", "", ""
	if infiniBand {
		lidFormat, smLIDFormat, lmcFormat = "lid %s ", "sm_lid %s ", "lmc %s "
	}
	p.Uint(output.Any, "lid", lidFormat, uint64(port.LID))
	p.Uint(output.Any, "sm_lid", smLIDFormat, uint64(port.SMLID))
	p.Uint(output.Any, "lmc", lmcFormat, uint64(port.LMC))
	if details && port.MTUNote != "" {
		p.String(output.Any, "mtu_note", p.SL()+"    mtu_note: %s", port.MTUNote)
	}
	p.CloseObject()
	p.Newline()
}
