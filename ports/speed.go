package ports

import "strconv"

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
