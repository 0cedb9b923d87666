package pci

import (
	"encoding/binary"
	"strconv"
	"strings"
)

// Config is what config space says beyond the header. It needs
// CAP_SYS_ADMIN: other readers get the 64-byte header only, and
// Function.Config is nil for them.
type Config struct {
	// Size is the number of bytes read: 256 (no extended config space:
	// no ACS, no ATS can show) or 4096.
	Size int `json:"size"`
	// Express is the PCI Express capability; nil for conventional PCI.
	Express *Express `json:"express"`
	// ACS is the Access Control Services capability; nil when the
	// function has none (or Size is 256).
	ACS *ACS `json:"acs"`
	// ATS is the Address Translation Services capability; nil when none.
	ATS *ATS `json:"ats"`
}

// PortType is the device/port type of the PCI Express capability.
type PortType uint8

// Port types (PCI_EXP_TYPE_*).
const (
	PortEndpoint       PortType = 0x0
	PortLegacyEndpoint PortType = 0x1
	PortRoot           PortType = 0x4
	PortUpstream       PortType = 0x5
	PortDownstream     PortType = 0x6
	PortPCIeToPCI      PortType = 0x7
	PortPCIToPCIe      PortType = 0x8
	PortRCEndpoint     PortType = 0x9
	PortRCEventColl    PortType = 0xa
)

var portTypeNames = map[PortType]string{
	PortEndpoint: "endpoint", PortLegacyEndpoint: "legacy endpoint", PortRoot: "root port",
	PortUpstream: "upstream port", PortDownstream: "downstream port", PortPCIeToPCI: "PCIe-to-PCI bridge",
	PortPCIToPCIe: "PCI-to-PCIe bridge", PortRCEndpoint: "root complex integrated endpoint",
	PortRCEventColl: "root complex event collector",
}

func (t PortType) String() string {
	if n, ok := portTypeNames[t]; ok {
		return n
	}
	return "type " + strconv.Itoa(int(t))
}

// MarshalText writes String.
func (t PortType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// Express is the PCI Express capability (ID 0x10).
type Express struct {
	PortType PortType `json:"port_type"`
	// MaxPayloadSupported is what the function can do (DevCap), bytes.
	MaxPayloadSupported int `json:"max_payload_supported"`
	// MaxPayload (MPS) and MaxReadRequest (MRRS) are the sizes in use
	// (DevCtl), bytes.
	MaxPayload     int `json:"max_payload"`
	MaxReadRequest int `json:"max_read_request"`
	// RelaxedOrdering is DevCtl's Enable Relaxed Ordering: what mlx5
	// needs to honour IBV_ACCESS_RELAXED_ORDERING on reads.
	RelaxedOrdering bool `json:"relaxed_ordering"`
	NoSnoop         bool `json:"no_snoop"`
}

// ACSFlags are the bits of the ACS Capability and Control registers.
type ACSFlags uint16

// ACS bits (PCI_ACS_*).
const (
	ACSSourceValidation    ACSFlags = 1 << 0
	ACSTranslationBlocking ACSFlags = 1 << 1
	ACSRequestRedirect     ACSFlags = 1 << 2 // P2P requests go up to the root complex
	ACSCompletionRedirect  ACSFlags = 1 << 3
	ACSUpstreamForwarding  ACSFlags = 1 << 4
	ACSEgressControl       ACSFlags = 1 << 5
	ACSDirectTranslated    ACSFlags = 1 << 6 // translated P2P may go direct (ATS)
)

// acsNames are lspci's names of the ACS bits, in bit order.
var acsNames = []string{"SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans"}

// String formats f as lspci's ACSCtl line does:
// "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-".
func (f ACSFlags) String() string {
	parts := make([]string, len(acsNames))
	for i, n := range acsNames {
		sign := "-"
		if f&(1<<i) != 0 {
			sign = "+"
		}
		parts[i] = n + sign
	}
	return strings.Join(parts, " ")
}

// Redirects reports whether f sends peer-to-peer requests or completions
// up to the root complex (Request or Completion Redirect): what makes
// GPUDirect traffic between a GPU and a NIC under one switch leave it.
func (f ACSFlags) Redirects() bool { return f&(ACSRequestRedirect|ACSCompletionRedirect) != 0 }

// ACS is the Access Control Services capability (extended ID 0x0D).
type ACS struct {
	Capability ACSFlags `json:"capability"` // the controls the port has
	Control    ACSFlags `json:"control"`    // the controls turned on
}

// ATS is the Address Translation Services capability (extended ID 0x0F):
// a device that caches IOMMU translations, whose peer traffic ACS Direct
// Translated P2P lets go direct in a VM.
type ATS struct {
	Enabled bool `json:"enabled"`
	// SmallestTranslationUnit is ATS Control's STU field.
	SmallestTranslationUnit uint8 `json:"smallest_translation_unit"`
}

// Capability IDs.
const (
	capExpress = 0x10
	extCapACS  = 0x0d
	extCapATS  = 0x0f
)

// parseConfig reads the capabilities out of config space b; nil when b is
// the header only (a reader without CAP_SYS_ADMIN).
func parseConfig(b []byte) *Config {
	if len(b) <= 64 {
		return nil
	}
	c := &Config{Size: len(b)}
	le := binary.LittleEndian
	const statusCapList = 0x10
	if le.Uint16(b[0x06:])&statusCapList != 0 {
		seen := map[int]bool{}
		for p := int(b[0x34] & 0xfc); p >= 0x40 && p+2 <= len(b) && !seen[p]; p = int(b[p+1] & 0xfc) {
			seen[p] = true
			if b[p] == capExpress && p+0x0a <= len(b) {
				flags := le.Uint16(b[p+0x02:])
				devCap := le.Uint32(b[p+0x04:])
				devCtl := le.Uint16(b[p+0x08:])
				c.Express = &Express{
					PortType:            PortType(flags >> 4 & 0xf),
					MaxPayloadSupported: 128 << (devCap & 0x7),
					MaxPayload:          128 << (devCtl >> 5 & 0x7),
					MaxReadRequest:      128 << (devCtl >> 12 & 0x7),
					RelaxedOrdering:     devCtl&(1<<4) != 0,
					NoSnoop:             devCtl&(1<<11) != 0,
				}
			}
		}
	}
	// Extended capabilities: an entry with ID 0 and a next pointer is
	// skipped, not the end (hypervisors hide capabilities that way).
	seen := map[int]bool{}
	for p := 0x100; p >= 0x100 && p+8 <= len(b) && !seen[p]; {
		seen[p] = true
		h := le.Uint32(b[p:])
		if h == 0 || h == 0xffffffff {
			break
		}
		switch h & 0xffff {
		case extCapACS:
			c.ACS = &ACS{Capability: ACSFlags(le.Uint16(b[p+4:])), Control: ACSFlags(le.Uint16(b[p+6:]))}
		case extCapATS:
			ctl := le.Uint16(b[p+6:])
			c.ATS = &ATS{Enabled: ctl&(1<<15) != 0, SmallestTranslationUnit: uint8(ctl & 0x1f)}
		}
		next := int(h >> 20 & 0xffc)
		if next == 0 {
			break
		}
		p = next
	}
	return c
}
