package grammar

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/health"
	"github.com/grdma/grdma/ib"
)

// CheckNames are the checks `grdma check` runs, in this order by default:
// "devices" (health.CheckDevices), "ports" (health.CheckPorts), "probe" (health.Probe),
// "gdr" (health.CheckGDR) and "cm" (health.CheckCM).
var CheckNames = []string{"devices", "ports", "probe", "gdr", "cm"}

// ParseCheck reads the words of `grdma check`: check names (CheckNames,
// all of them when none is named) and expectations, abbreviated as rdma
// abbreviates keywords (Check's table):
//
//	[devices|ports|probe|gdr|cm]... [state STATE] [min-rate GBPS] [mtu BYTES] [gid-type v1|v2|ib]
//	[gid-index N [type v1|v2|ib] [ipv4|ipv6]] [netdev-mtu BYTES] [device-count N] [device-names A,B]
//	[gpu BDF...]
//
// Wrong words are a *cmdline.UsageError naming the problem.
func ParseCheck(words []string) (checks []string, exp health.Expect, err error) {
	args := cmdline.NewArgs(words, "")
	keywords := Check.KeywordNames()
	for !args.Empty() {
		kw, err := args.Keyword("check or expectation", "", keywords...)
		if err != nil {
			return nil, exp, err
		}
		if slices.Contains(CheckNames, kw) {
			checks = append(checks, kw)
			continue
		}
		if kw == "gpu" {
			if exp.GPUs, err = gpuFunctions(args, exp.GPUs); err != nil {
				return nil, exp, err
			}
			continue
		}
		if kw == "ipv4" || kw == "ipv6" {
			exp.GIDSelect.Family = map[string]gid.Family{"ipv4": gid.IPv4, "ipv6": gid.IPv6}[kw]
			continue
		}
		v, err := args.Value(kw + " value")
		if err != nil {
			return nil, exp, err
		}
		if err := setExpect(&exp, kw, v); err != nil {
			return nil, exp, err
		}
	}
	if exp.GIDIndex == nil && (exp.GIDSelect != gid.Criteria{}) {
		return nil, exp, cmdline.Usagef("", "type, ipv4 and ipv6 choose the GID of gid-index N: give gid-index")
	}
	if len(checks) == 0 {
		checks = CheckNames
	}
	return checks, exp, nil
}

// setExpect reads the value v of expectation keyword kw.
func setExpect(exp *health.Expect, kw, v string) (err error) {
	switch kw {
	case "state":
		st, ok := ib.ParsePortState(v)
		if !ok {
			return cmdline.Usagef("", "unknown port state %q: expected DOWN, INIT, ARMED, ACTIVE", v)
		}
		exp.State = st
	case "min-rate":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) || math.IsInf(f, 1) { // NaN compares false
			return cmdline.Usagef("", "min-rate must be a positive number of Gb/s, not %q", v)
		}
		exp.MinRateGbps = f
	case "mtu":
		if exp.ActiveMTU, err = positive(kw, v); err != nil {
			return err
		}
		switch exp.ActiveMTU {
		case 256, 512, 1024, 2048, 4096:
		default:
			return cmdline.Usagef("", "mtu must be an IB MTU (256, 512, 1024, 2048, 4096), not %d", exp.ActiveMTU)
		}
	case "gid-type":
		if exp.GIDType, err = gid.ParseType(v); err != nil {
			return cmdline.Usagef("", "unknown gid-type %q: expected v1, v2, ib", v)
		}
	case "gid-index":
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return cmdline.Usagef("", "gid-index must be a GID table index (0 or more), not %q", v)
		}
		exp.GIDIndex = &n
	case "type":
		if exp.GIDSelect.Type, err = gid.ParseType(v); err != nil {
			return cmdline.Usagef("", "unknown GID type %q: expected v1, v2, ib", v)
		}
	case "netdev-mtu":
		exp.NetdevMTU, err = positive(kw, v)
	case "device-count":
		exp.DeviceCount, err = positive(kw, v)
	case "device-names":
		exp.DeviceNames = strings.Split(v, ",")
	}
	return err
}

// positive reads the value v of keyword kw as a positive number.
func positive(kw, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, cmdline.Usagef("", "%s must be a positive number, not %q", kw, v)
	}
	return n, nil
}
