package ib

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// PortState is the logical port state (enum ib_port_state).
type PortState uint8

// Logical port states.
const (
	PortNop         PortState = 0
	PortDown        PortState = 1
	PortInit        PortState = 2
	PortArmed       PortState = 3
	PortActive      PortState = 4
	PortActiveDefer PortState = 5
)

var portStateNames = [...]string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}

// String returns the name rdma prints ("ACTIVE", ...; "UNKNOWN" otherwise).
func (s PortState) String() string {
	if int(s) < len(portStateNames) {
		return portStateNames[s]
	}
	return "UNKNOWN"
}

// PhysState is the physical port state (enum ib_port_phys_state).
type PhysState uint8

// Physical port states.
const (
	PhysSleep    PhysState = 1
	PhysPolling  PhysState = 2
	PhysDisabled PhysState = 3
	// PhysTraining is PortConfigurationTraining; rdma prints it "ARMED".
	PhysTraining    PhysState = 4
	PhysLinkUp      PhysState = 5
	PhysLinkErrRec  PhysState = 6
	PhysPHYTest     PhysState = 7
	PhysOPAOffline  PhysState = 9
	PhysOPAPortTest PhysState = 11
)

var physStateNames = [...]string{"NOP", "SLEEP", "POLLING", "DISABLED", "ARMED", "LINK_UP",
	"LINK_ERROR_RECOVER", "PHY_TEST", "UNKNOWN", "OPA_OFFLINE", "UNKNOWN", "OPA_TEST"}

// String returns the name rdma prints ("LINK_UP", ...; "UNKNOWN" otherwise).
func (s PhysState) String() string {
	if int(s) < len(physStateNames) {
		return physStateNames[s]
	}
	return "UNKNOWN"
}

// ParsePortState returns the logical port state named name (DOWN to
// ACTIVE_DEFER, as String writes them, in any case).
func ParsePortState(name string) (PortState, bool) {
	for st := PortDown; st <= PortActiveDefer; st++ {
		if strings.EqualFold(st.String(), name) {
			return st, true
		}
	}
	return 0, false
}

// LinkLayer is a port's link layer (enum rdma_link_layer,
// IB_LINK_LAYER_*), as QUERY_PORT reports it and sysfs ports/N/link_layer
// names it.
type LinkLayer uint8

// Link layers.
const (
	// LinkLayerUnspecified is what drivers of InfiniBand-only devices
	// report; the kernel and libibverbs treat it as InfiniBand.
	LinkLayerUnspecified LinkLayer = 0
	LinkLayerInfiniBand  LinkLayer = 1
	LinkLayerEthernet    LinkLayer = 2
	// LinkLayerUnknown is no kernel value: it is what sysfs calls
	// "Unknown" (a link layer the kernel cannot name).
	LinkLayerUnknown LinkLayer = 0xff
)

// String returns the name sysfs and ibv_devinfo print: "InfiniBand"
// (also for LinkLayerUnspecified), "Ethernet" or "Unknown".
func (l LinkLayer) String() string {
	switch l {
	case LinkLayerUnspecified, LinkLayerInfiniBand:
		return "InfiniBand"
	case LinkLayerEthernet:
		return "Ethernet"
	}
	return "Unknown"
}

// IsEthernet reports whether the port runs RoCE (or iWARP) over Ethernet.
func (l LinkLayer) IsEthernet() bool { return l == LinkLayerEthernet }

// IsInfiniBand reports whether the port is InfiniBand
// (LinkLayerUnspecified included).
func (l LinkLayer) IsInfiniBand() bool { return l == LinkLayerInfiniBand || l == LinkLayerUnspecified }

// ParseLinkLayer reads a link layer as sysfs writes it: "InfiniBand",
// "Ethernet", anything else LinkLayerUnknown.
func ParseLinkLayer(name string) LinkLayer {
	switch name {
	case "InfiniBand":
		return LinkLayerInfiniBand
	case "Ethernet":
		return LinkLayerEthernet
	}
	return LinkLayerUnknown
}

// Width is a port's active link width (enum ib_port_width). The codes are
// not in lane order.
type Width uint8

// Link widths.
const (
	Width1X  Width = 1
	Width4X  Width = 2
	Width8X  Width = 4
	Width12X Width = 8
	Width2X  Width = 16
)

// Lanes returns the number of lanes (ib_width_enum_to_int), 0 for an
// unknown code.
func (w Width) Lanes() int {
	switch w {
	case Width1X:
		return 1
	case Width2X:
		return 2
	case Width4X:
		return 4
	case Width8X:
		return 8
	case Width12X:
		return 12
	}
	return 0
}

// String returns "4X"; "" for an unknown code.
func (w Width) String() string {
	if lanes := w.Lanes(); lanes != 0 {
		return strconv.Itoa(lanes) + "X"
	}
	return ""
}

// WidthFromLanes returns the width of lanes lanes, 0 if there is none.
func WidthFromLanes(lanes int) Width {
	for _, w := range []Width{Width1X, Width2X, Width4X, Width8X, Width12X} {
		if w.Lanes() == lanes {
			return w
		}
	}
	return 0
}

// Speed is a port's active per-lane speed (enum ib_port_speed, and
// ibv_port_attr.active_speed_ex, which holds the codes past NDR).
type Speed uint32

// Link speeds.
const (
	SpeedSDR   Speed = 1
	SpeedDDR   Speed = 2
	SpeedQDR   Speed = 4
	SpeedFDR10 Speed = 8
	SpeedFDR   Speed = 16
	SpeedEDR   Speed = 32
	SpeedHDR   Speed = 64
	SpeedNDR   Speed = 128
	SpeedXDR   Speed = 256
)

var speeds = []struct {
	speed Speed
	name  string
	deci  int // nominal per-lane rate in tenths of Gb/s, as sysfs rate counts
}{
	{SpeedSDR, "SDR", 25},
	{SpeedDDR, "DDR", 50},
	{SpeedQDR, "QDR", 100},
	{SpeedFDR10, "FDR10", 100},
	{SpeedFDR, "FDR", 140},
	{SpeedEDR, "EDR", 250},
	{SpeedHDR, "HDR", 500},
	{SpeedNDR, "NDR", 1000},
	{SpeedXDR, "XDR", 2000},
}

// String returns the name sysfs rate and ibstat use ("EDR"); "" for an
// unknown code.
func (s Speed) String() string {
	for _, e := range speeds {
		if e.speed == s {
			return e.name
		}
	}
	return ""
}

// LaneDeciGbps returns the nominal per-lane rate in tenths of Gb/s (250
// for EDR), 0 for an unknown code.
func (s Speed) LaneDeciGbps() int {
	for _, e := range speeds {
		if e.speed == s {
			return e.deci
		}
	}
	return 0
}

// ParseSpeed returns the speed named name as sysfs rate prints it. Old
// kernels printed no name for SDR, so "" is SDR.
func ParseSpeed(name string) (Speed, bool) {
	if name == "" {
		return SpeedSDR, true
	}
	for _, e := range speeds {
		if e.name == name {
			return e.speed, true
		}
	}
	return 0, false
}

// PortRef names a port by RDMA device name and port number: the
// DEV[/PORT] of a command line, where Port 0 means every port of Device
// (and Device "" every device).
type PortRef struct {
	Device string
	Port   uint32
}

// String writes the reference as a command line does: "rxe0/1", or
// "rxe0" for every port.
func (r PortRef) String() string {
	if r.Port == 0 {
		return r.Device
	}
	return r.Device + "/" + strconv.FormatUint(uint64(r.Port), 10)
}

// NotFoundError is an RDMA device, or a port of one, asked for by name that
// is not there. It is an fs.ErrNotExist (errors.Is).
type NotFoundError struct {
	Device string
	Port   uint32 // 0: the device is missing
	// Existing are the devices there are, when the reader listed them
	// (non-nil, empty when there are none); nil when it did not.
	Existing []string
	// NumPorts is how many ports Device has, when known (0 otherwise).
	NumPorts uint32
}

// Is makes a NotFoundError an fs.ErrNotExist.
func (e *NotFoundError) Is(target error) bool { return target == fs.ErrNotExist }

// Error says what is missing and, when known, what there is:
// "RDMA device rxe9 not found (devices: rxe0, rxe1)", "RDMA device rxe0
// has no port 2 (it has 1)".
func (e *NotFoundError) Error() string {
	if e.Port != 0 {
		if e.NumPorts != 0 {
			return fmt.Sprintf("RDMA device %s has no port %d (it has %d)", e.Device, e.Port, e.NumPorts)
		}
		return fmt.Sprintf("RDMA device %s has no port %d", e.Device, e.Port)
	}
	switch {
	case e.Existing == nil:
		return fmt.Sprintf("RDMA device %s not found", e.Device)
	case len(e.Existing) == 0:
		return fmt.Sprintf("RDMA device %s not found (there are no RDMA devices)", e.Device)
	}
	return fmt.Sprintf("RDMA device %s not found (devices: %s)", e.Device, strings.Join(e.Existing, ", "))
}
