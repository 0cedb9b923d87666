package health

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/grdma/grdma/cmconfig"
	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/node"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/sysfs"
)

// CMPort is what the "cm" check looks at for one RoCE port: the port as
// read, what the RDMA CM chose for connections over each of its IP
// addresses (rdmacm.Channel.Choose), and the port's defaults in configfs.
type CMPort struct {
	Port        node.Port
	Choices     []CMChoice
	Defaults    cmconfig.Defaults
	DefaultsErr error
	// MaxCQE is the device's largest completion queue (QUERY_DEVICE
	// max_cqe), 0 when unknown.
	MaxCQE uint32
}

// RXMMsgCQ is the completion queue libfabric's verbs;ofi_rxm opens for
// its MSG endpoints, by default: (FI_OFI_RXM_MSG_TX_SIZE 128 +
// FI_OFI_RXM_MSG_RX_SIZE 128) × FI_UNIVERSE_SIZE 256 entries
// (prov/rxm/src/rxm_ep.c, libfabric 1.17).
const RXMMsgCQ = (128 + 128) * 256

// CMChoice is the CM's choice for one address, or why there is none.
type CMChoice struct {
	rdmacm.Choice
	Err error
}

// CMResults checks each port: the CM must bind connections over each of
// its addresses to that port (FAIL otherwise) with a GID of the RoCE
// version its default mode says (FAIL); a RoCE v1 default is a WARN, as
// is a GID that `gid show -q` (gid.Select with sel) picks of another
// RoCE version than the CM's: jobs that pick GIDs by index
// (NCCL_IB_GID_INDEX) and jobs that connect by IP would speak different
// RoCE versions.
func CMResults(in []CMPort, sel gid.Criteria) []Result {
	out := make([]Result, 0, len(in))
	for _, cp := range in {
		out = append(out, cmResult(cp, sel))
	}
	return out
}

// cmResult is one port's verdict: its worst problem, with the facts of
// the first address.
func cmResult(cp CMPort, sel gid.Criteria) Result {
	p := cp.Port.Port
	subject := fmt.Sprintf("%s/%d", p.Device, p.Port)
	r := Result{Name: "cm", Subject: subject, Status: Pass, Facts: []Fact{}}
	problem := func(st Status, msg string) {
		if st == Fail && r.Status != Fail || st == Warn && r.Status == Pass {
			r.Status, r.Message = st, msg
		}
	}
	mode := "unknown"
	if cp.DefaultsErr == nil {
		mode = cp.Defaults.RoCEMode.String()
		r.Facts = append(r.Facts, Fact{"roce_mode", mode}, Fact{"tos", strconv.Itoa(int(cp.Defaults.ToS))})
	} else {
		problem(Warn, fmt.Sprintf("cannot read the port's default RoCE mode: %v", cp.DefaultsErr))
	}
	var used []string
	for i, c := range cp.Choices {
		if c.Err != nil {
			problem(Fail, fmt.Sprintf("the RDMA CM cannot connect over %s: %v", c.Addr, c.Err))
			continue
		}
		if c.Device.Index != p.DevIndex || uint32(c.Device.Port) != p.Port {
			problem(Fail, fmt.Sprintf("the RDMA CM binds connections over %s to RDMA device %d port %d, not %s (index %d): applications connecting by IP use another device",
				c.Addr, c.Device.Index, c.Device.Port, subject, p.DevIndex))
			continue
		}
		entry, ok := entryAt(cp.Port.GIDs, int(c.SGIDIndex))
		if !ok {
			problem(Warn, fmt.Sprintf("the RDMA CM uses GID index %d for %s, which the GID table read has not", c.SGIDIndex, c.Addr))
			continue
		}
		used = append(used, fmt.Sprintf("%s: GID index %d (%s)", c.Addr, entry.Index, entry.Type))
		if i == 0 {
			r.Facts = append(r.Facts, Fact{"addr", c.Addr.String()}, Fact{"gid_index", strconv.Itoa(entry.Index)},
				Fact{"gid_type", entry.Type.String()}, Fact{"traffic_class", strconv.Itoa(int(c.Path.TrafficClass))})
		}
		if cp.DefaultsErr == nil && entry.Type != cp.Defaults.RoCEMode {
			problem(Fail, fmt.Sprintf("the RDMA CM uses GID index %d (%s) for %s though the port's default RoCE mode is %s",
				entry.Index, entry.Type, c.Addr, cp.Defaults.RoCEMode))
		}
		if pick, err := gid.Select(cp.Port.GIDs, sel); err == nil && pick.Type != entry.Type {
			problem(Warn, fmt.Sprintf("gid show -q picks GID index %d (%s), the RDMA CM uses %s GIDs (index %d for %s): jobs given a GID index and jobs connecting by IP speak different RoCE versions; pick the CM's: grdma gid show %s type %s -q",
				pick.Index, pick.Type, entry.Type, entry.Index, c.Addr, subject, entry.Type.Version()))
		}
	}
	if cp.MaxCQE != 0 && cp.MaxCQE < RXMMsgCQ {
		r.Facts = append(r.Facts, Fact{"max_cqe", strconv.Itoa(int(cp.MaxCQE))})
		problem(Warn, fmt.Sprintf("%s's completion queues hold at most %d entries (max_cqe): libfabric's verbs;ofi_rxm asks %d by default ((128 + 128) × FI_UNIVERSE_SIZE 256) and fails with \"Unable to create verbs CQ\" (EINVAL): run such jobs with FI_UNIVERSE_SIZE=%d or less",
			p.Device, cp.MaxCQE, RXMMsgCQ, cp.MaxCQE/256))
	}
	if cp.DefaultsErr == nil && cp.Defaults.RoCEMode == gid.TypeRoCEv1 {
		problem(Warn, fmt.Sprintf("the port's default RoCE mode is v1, which cannot cross IP routers and which peers defaulting to v2 do not answer: grdma cm set %s roce-mode v2", subject))
	}
	if r.Status == Pass {
		r.Message = fmt.Sprintf("the RDMA CM binds %s to %s, %s default", strings.Join(used, ", "), subject, mode)
	}
	return r
}

func entryAt(entries []gid.Entry, index int) (gid.Entry, bool) {
	for _, e := range entries {
		if e.Index == index {
			return e, true
		}
	}
	return gid.Entry{}, false
}

// Addresses returns the IP addresses a RoCE port has GIDs for: IPv4, and
// IPv6 but link-local (which needs a zone the GID does not say), usable
// ones only, in table order.
func Addresses(p node.Port) []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, e := range p.GIDs {
		if e.Type == gid.TypeIB || e.State != gid.AddrUsable || e.GID.IsLinkLocal() || e.GID.IsZero() {
			continue
		}
		a := e.GID.Addr().Unmap()
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// CMSource is where CheckCM reads what it checks beyond the snapshot.
type CMSource struct {
	Sysfs sysfs.FS // configfs is read below its root
	// OpenCM opens the RDMA CM (locator.OpenRDMACM).
	OpenCM func() (*rdmacm.Channel, error)
	// MaxCQE, when set, returns a device's max_cqe (uverbs
	// QUERY_DEVICE).
	MaxCQE func(d node.Device) (uint32, error)
	// GIDSelect are the criteria of the GID `gid show -q` picks.
	GIDSelect gid.Criteria
}

// CheckCM is the "cm" check: for each ACTIVE RoCE port of s with an IP
// address, what the RDMA CM chooses for connections over each address,
// the port's configfs defaults and its device's completion queue limit,
// judged by CMResults. A node whose CM cannot be opened (rdma_ucm not
// loaded) gets one WARN: applications that connect by IP cannot run
// there.
func CheckCM(ctx context.Context, s *node.Snapshot, src CMSource) []Result {
	if s.PortsErr != nil {
		return []Result{failure("cm", s.PortsErr)}
	}
	var ports []node.Port
	for _, p := range s.Ports {
		if p.Port.State == ib.PortActive && p.Port.LinkLayer.IsEthernet() && len(Addresses(p)) > 0 {
			ports = append(ports, p)
		}
	}
	if len(ports) == 0 {
		return nil
	}
	ch, err := src.OpenCM()
	if err != nil {
		return []Result{{Name: "cm", Status: Warn, Subject: "node", Facts: []Fact{},
			Message: fmt.Sprintf("the RDMA CM is not available, so applications that connect by IP address cannot run: %v", err)}}
	}
	defer ch.Close()
	maxCQE := map[string]uint32{}
	if src.MaxCQE != nil {
		for _, d := range s.Devices {
			if n, err := src.MaxCQE(d); err == nil {
				maxCQE[d.Name] = n
			}
		}
	}
	var in []CMPort
	for _, p := range ports {
		cp := CMPort{Port: p, MaxCQE: maxCQE[p.Port.Device]}
		for _, a := range Addresses(p) {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			c, err := ch.Choose(cctx, a)
			cancel()
			c.Addr = a
			cp.Choices = append(cp.Choices, CMChoice{Choice: c, Err: err})
		}
		d, err := cmconfig.Read(src.Sysfs, p.Port.Device, p.Port.Port)
		if err == nil && len(d) == 1 {
			cp.Defaults = d[0]
		} else {
			cp.DefaultsErr = err
		}
		in = append(in, cp)
	}
	return CMResults(in, src.GIDSelect)
}
