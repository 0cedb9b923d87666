package render

import (
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/output"
)

// Device prints one device as rdma dev does (rdma/dev.c); details (-d)
// adds adaptive moderation and the capabilities.
func Device(p *output.Printer, d *nldev.Device, details bool) {
	p.OpenObject("")
	p.Uint(output.Any, "ifindex", "%s: ", uint64(d.Index))
	p.String(output.Any, "ifname", "%s: ", d.Name)
	if d.Has(nldev.AttrDevNodeType) {
		p.String(output.Any, "node_type", "node_type %s ", d.NodeType.String())
	}
	if d.Has(nldev.AttrDevProtocol) {
		p.String(output.Any, "protocol", "protocol %s ", d.Protocol)
	}
	if d.Has(nldev.AttrFWVersion) {
		p.String(output.Any, "fw", "fw %s ", d.FWVersion)
	}
	if d.Has(nldev.AttrNodeGUID) {
		p.String(output.Any, "node_guid", "node_guid %s ", nldev.FormatGUID(d.NodeGUID))
	}
	if d.Has(nldev.AttrSysImageGUID) {
		p.String(output.Any, "sys_image_guid", "sys_image_guid %s ", nldev.FormatGUID(d.SysImageGUID))
	}
	if d.Has(nldev.AttrDevType) {
		typ := "unknown"
		if d.Type == nldev.DeviceTypeSMI {
			typ = "smi"
		}
		p.String(output.Any, "type", "type %s ", typ)
	}
	if d.Has(nldev.AttrParentName) {
		p.String(output.Any, "parent", "parent %s ", d.ParentName)
	}
	if details {
		if d.Has(nldev.AttrDevDIM) && d.DIM <= 1 {
			p.OnOff(output.Any, "adaptive-moderation", "adaptive-moderation %s ", d.DIM == 1)
		}
		if d.Has(nldev.AttrCapFlags) {
			caps(p, nldev.DeviceCapNames(d.CapFlags))
		}
	}
	p.CloseObject()
	p.Newline()
}

// caps prints a capability list: text "\n    caps: <A, B>", JSON
// "caps":["A","B"].
func caps(p *output.Printer, names []string) {
	p.Text(p.SL() + "    caps: <")
	p.OpenArray(output.JSONOnly, "caps", "")
	for i, n := range names {
		format := "%s, "
		if i == len(names)-1 {
			format = "%s"
		}
		p.String(output.Any, "", format, n)
	}
	p.CloseArray(output.Any, ">")
}

// Link prints one port as rdma link does (rdma/link.c); details (-d)
// adds the netdev's index and the capabilities.
func Link(p *output.Printer, port *nldev.Port, details bool) {
	p.OpenObject("")
	p.Uint(output.JSONOnly, "ifindex", "", uint64(port.DevIndex))
	p.String(output.Any, "ifname", "link %s/", port.Device)
	p.Uint(output.Any, "port", "%s ", uint64(port.Port))
	if port.Has(nldev.AttrSubnetPrefix) {
		p.String(output.Any, "subnet_prefix", "subnet_prefix %s ", nldev.FormatGUID(port.SubnetPrefix))
	}
	if port.Has(nldev.AttrLID) {
		p.Uint(output.Any, "lid", "lid %s ", uint64(port.LID))
	}
	if port.Has(nldev.AttrSMLID) {
		p.Uint(output.Any, "sm_lid", "sm_lid %s ", uint64(port.SMLID))
	}
	if port.Has(nldev.AttrLMC) {
		p.Uint(output.Any, "lmc", "lmc %s ", uint64(port.LMC))
	}
	if port.Has(nldev.AttrPortState) {
		p.String(output.Any, "state", "state %s ", port.State.String())
	}
	if port.Has(nldev.AttrPortPhysState) {
		p.String(output.Any, "physical_state", "physical_state %s ", port.PhysState.String())
	}
	if port.Has(nldev.AttrNetdevName) && port.Has(nldev.AttrNetdevIndex) {
		p.String(output.Any, "netdev", "netdev %s ", port.Netdev)
		format := ""
		if details {
			format = "netdev_index %s "
		}
		p.Uint(output.Any, "netdev_index", format, uint64(port.NetdevIndex))
	}
	if details && port.Has(nldev.AttrCapFlags) {
		caps(p, nldev.PortCapNames(port.CapFlags))
	}
	p.CloseObject()
	p.Newline()
}

// System prints the settings as rdma system does (rdma/sys.c), and as
// one JSON object on a line where rdma prints text even with -j.
func System(p *output.Printer, s *nldev.System) {
	p.StartPlain()
	p.OpenObject("")
	if s.Has(nldev.AttrSysNetnsMode) {
		mode := "unknown"
		switch s.NetNSMode {
		case nldev.NetNSExclusive:
			mode = "exclusive"
		case nldev.NetNSShared:
			mode = "shared"
		}
		p.String(output.Any, "netns", "netns %s ", mode)
	}
	if s.Has(nldev.AttrSysPrivilegedQKeyMode) {
		p.OnOff(output.Any, "privileged-qkey", "privileged-qkey %s ", s.PrivilegedQKey)
	}
	p.OnOff(output.Any, "monitor", "monitor %s ", s.Monitor)
	p.OnOff(output.Any, "copy-on-fork", "copy-on-fork %s", s.CopyOnFork)
	p.CloseObject()
	p.NL()
	p.EndPlain()
}

// Event prints an event as rdma monitor does (rdma/monitor.c), or as one
// JSON line with rdma's keys.
func Event(p *output.Printer, e *nldev.Event) {
	p.StartPlain()
	p.OpenObject("")
	p.String(output.Any, "event_type", "%s\t", "["+e.Type.String()+"]")
	if e.Has(nldev.AttrDevIndex) {
		p.Uint(output.Any, "rdma_index", "dev %s", uint64(e.DevIndex))
	}
	if e.Has(nldev.AttrDevName) {
		p.String(output.Any, "rdma_dev", " %s", e.Device)
	}
	if e.Has(nldev.AttrPortIndex) {
		p.Uint(output.Any, "port", " port %s", uint64(e.Port))
	}
	if e.Has(nldev.AttrNetdevIndex) {
		p.Uint(output.Any, "netdev_idx", " netdev %s", uint64(e.NetdevIndex))
	}
	if e.Has(nldev.AttrNetdevName) {
		p.String(output.Any, "netdev_name", " %s", e.Netdev)
	}
	p.CloseObject()
	p.EndPlain()
	if !p.JSON() {
		p.Newline()
	}
}
