package topo

import "github.com/grdma/grdma/pci"

// LinkState is the health of one PCIe link.
type LinkState string

// Link states.
const (
	// LinkOK: the link runs at the speed and width both ends can do.
	LinkOK LinkState = "ok"
	// LinkDegraded: it trained below that (Speed or Width below).
	LinkDegraded LinkState = "degraded"
	// LinkDown: no width or speed (the link is down).
	LinkDown LinkState = "down"
	// LinkUnknown: the functions do not say (not PCI Express, or their
	// capabilities read as unknown).
	LinkUnknown LinkState = "unknown"
)

// Hop is one PCIe link on a device's way up to its root port: between a
// function (the device, or a switch's upstream port) and the port above
// it (a switch's downstream port or a root port). Both ends of a link
// report the same current speed and width; each its own capability.
type Hop struct {
	// Function is the lower end of the link.
	Function pci.Address `json:"function"`
	// Port is the upper end; nil for a function on a root bus (in VMs
	// the hypervisor shows no port: only the function's own link).
	Port *pci.Address `json:"port"`
	// Speed and Width are the link's current values.
	Speed pci.Speed `json:"speed"`
	Width int       `json:"width"`
	// CapableSpeed and CapableWidth are the most both ends can do: the
	// lower of the two maxima (an end that reports none is left out).
	CapableSpeed pci.Speed `json:"capable_speed"`
	CapableWidth int       `json:"capable_width"`
	State        LinkState `json:"state"`
	// SpeedBelow and WidthBelow say what is degraded.
	SpeedBelow bool `json:"speed_below"`
	WidthBelow bool `json:"width_below"`
}

// hops pairs the functions on f's way up into links: f with the port
// above it, then each switch upstream port with the port above that
// (a downstream port and its upstream port are one switch, not a link).
func hops(f pci.Function, funcs map[pci.Address]*pci.Function) []Hop {
	chain := append([]pci.Address{f.Address}, f.Upstream...)
	var out []Hop
	for i := 0; i < len(chain); i += 2 {
		h := Hop{Function: chain[i]}
		lower := funcs[chain[i]]
		var upper *pci.Function
		if i+1 < len(chain) {
			port := chain[i+1]
			h.Port = &port
			upper = funcs[port]
		}
		judgeLink(&h, lower, upper)
		out = append(out, h)
	}
	return out
}

// judgeLink compares the current link with the capability of both ends.
func judgeLink(h *Hop, lower, upper *pci.Function) {
	var lo, up *pci.Link
	if lower != nil {
		lo = lower.Link
	}
	if upper != nil {
		up = upper.Link
	}
	if lo == nil {
		// Not PCI Express (conventional PCI behind a port, in VMs): the
		// port's link status describes no link to it.
		h.State = LinkUnknown
		return
	}
	h.Speed, h.Width = lo.Speed, lo.Width
	for _, l := range []*pci.Link{lo, up} {
		if l == nil {
			continue
		}
		if l.MaxSpeed > 0 && (h.CapableSpeed == 0 || l.MaxSpeed < h.CapableSpeed) {
			h.CapableSpeed = l.MaxSpeed
		}
		if l.MaxWidth > 0 && (h.CapableWidth == 0 || l.MaxWidth < h.CapableWidth) {
			h.CapableWidth = l.MaxWidth
		}
	}
	switch {
	case h.Width == 0 || h.Speed == 0:
		h.State = LinkDown
		if h.CapableSpeed == 0 && h.CapableWidth == 0 {
			h.State = LinkUnknown
		}
		return
	case h.CapableSpeed == 0 && h.CapableWidth == 0:
		h.State = LinkUnknown
		return
	}
	h.SpeedBelow = h.CapableSpeed > 0 && h.Speed < h.CapableSpeed
	h.WidthBelow = h.CapableWidth > 0 && h.Width < h.CapableWidth
	h.State = LinkOK
	if h.SpeedBelow || h.WidthBelow {
		h.State = LinkDegraded
	}
}
