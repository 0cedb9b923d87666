package pci

import (
	"math"
	"strconv"
	"strings"
)

// Speed is a PCIe link speed per lane in tenths of GT/s: 25 for 2.5 GT/s
// (Gen1) up to 640 for 64 GT/s (Gen6); 0 is unknown (a link that is down,
// a capability the port does not report).
type Speed uint16

// The speeds of the PCIe generations.
const (
	Gen1 Speed = 25
	Gen2 Speed = 50
	Gen3 Speed = 80
	Gen4 Speed = 160
	Gen5 Speed = 320
	Gen6 Speed = 640
)

// ParseSpeed parses a sysfs link speed: "16.0 GT/s PCIe" (kernels since
// 5.7), "16 GT/s" and "2.5 GT/s" (older); "Unknown" and anything else is 0.
func ParseSpeed(s string) Speed {
	num, _, ok := strings.Cut(strings.TrimSpace(s), " GT/s")
	if !ok {
		return 0
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 || v > 1000 {
		return 0
	}
	return Speed(math.Round(v * 10))
}

// String formats s as current kernels do, without the " PCIe" suffix:
// "16.0 GT/s"; "unknown" for 0.
func (s Speed) String() string {
	if s == 0 {
		return "unknown"
	}
	return strconv.Itoa(int(s)/10) + "." + strconv.Itoa(int(s)%10) + " GT/s"
}

// Gen returns the PCIe generation of s (1 for 2.5 GT/s ... 6 for 64 GT/s),
// 0 when unknown or not a generation's speed.
func (s Speed) Gen() int {
	switch s {
	case Gen1:
		return 1
	case Gen2:
		return 2
	case Gen3:
		return 3
	case Gen4:
		return 4
	case Gen5:
		return 5
	case Gen6:
		return 6
	}
	return 0
}

// MarshalText writes String, so that JSON shows "16.0 GT/s".
func (s Speed) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Link is a PCIe function's link as sysfs shows it. Current values are the
// function's Link Status register: for an endpoint or a switch upstream
// port its link towards the root, for a root or downstream port the link
// below it (both ends of a link report the same). Max values are the
// function's own capability, whatever its link partner can do.
type Link struct {
	Speed    Speed `json:"speed"`     // current_link_speed
	Width    int   `json:"width"`     // current_link_width, lanes; 0 when down or unknown
	MaxSpeed Speed `json:"max_speed"` // max_link_speed
	MaxWidth int   `json:"max_width"` // max_link_width; 0 unknown
}
