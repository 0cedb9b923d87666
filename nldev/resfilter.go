package nldev

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/ib"
)

// SyntaxError is a command line a parser of this package rejects before
// anything is sent: a usage error, the one type of package cmdline (a
// caller that tells usage errors apart needs no second one).
type SyntaxError = cmdline.UsageError

func syntaxf(format string, args ...any) error {
	return &SyntaxError{Msg: fmt.Sprintf(format, args...)}
}

// CommFunc returns the command name of a process (/proc/PID/comm); ok is
// false when it cannot be read. The comm filter and rdma's comm column
// need one.
type CommFunc func(pid uint32) (name string, ok bool)

// OwnerName is the name rdma shows as an object's comm: the process name
// of a user object, the module name of a kernel object.
func OwnerName(r *Resource, comm CommFunc) (string, bool) {
	switch {
	case r.Has(AttrResPID):
		if comm == nil {
			return "", false
		}
		return comm(r.PID)
	case r.Has(AttrResKernName):
		return r.KernName, true
	}
	return "", false
}

// ResFilterKind is what a FILTER of `res show OBJECT` takes as its value.
type ResFilterKind uint8

// Filter kinds.
const (
	// FilterLocation is dev DEV or link DEV[/PORT|/-]: it picks the
	// device and port to ask, not a field.
	FilterLocation ResFilterKind = iota
	// FilterNumber takes numbers and inclusive ranges, comma separated
	// ("1-3,7"), decimal or 0x hexadecimal, 64-bit.
	FilterNumber
	// FilterString takes a comma list of words, matched case-insensitively
	// (from Values when the filter has any).
	FilterString
)

// ResFilterSpec is one FILTER of `res show OBJECT`, as an entry of
// iproute2's res.h filter tables. ResFilters lists them per object.
type ResFilterSpec struct {
	Name string
	Kind ResFilterKind
	// Values are the only values a string filter accepts (enum names);
	// nil means any word.
	Values []string
	// ID marks the object's number: one plain value is looked up with a
	// single request instead of a dump.
	ID bool
	// Extension marks a filter that is grdma's, not rdma's (comm, and dev
	// or link where rdma has only the other).
	Extension bool
	// Unreported marks a filter rdma accepts although the kernel reports
	// no such field (cm_id dev-type, transport-type): it matches every
	// object, as in rdma.
	Unreported bool

	num       func(o ResObject) (uint64, bool)
	str       func(o ResObject, comm CommFunc) (string, bool)
	normalize func(string) (string, error)
	// strDefault: a string field the object lacks compares the field's
	// zero value, as rdma's rd_is_string_filtered_attr does.
	strDefault bool
	qpList     bool // the SRQ lqpn filter: picks QPs inside each SRQ
}

// resFilterTables are the filters of each object, in rdma's order (the
// order decides what an abbreviation means), grdma's extensions last.
var resFilterTables = map[ResType][]ResFilterSpec{
	ResQP: {
		{Name: "link", Kind: FilterLocation},
		idFilter("lqpn", AttrResLQPN, func(q *QP) uint64 { return uint64(q.LQPN) }),
		numFilter("rqpn", AttrResRQPN, func(q *QP) uint64 { return uint64(q.RQPN) }),
		pidFilter,
		numFilter("sq-psn", AttrResSQPSN, func(q *QP) uint64 { return uint64(q.SQPSN) }),
		numFilter("rq-psn", AttrResRQPSN, func(q *QP) uint64 { return uint64(q.RQPSN) }),
		strFilter("type", qpTypeFilterNames, func(q *QP) string { return q.Type.String() }),
		strFilter("path-mig-state", PathMigStateNames, func(q *QP) string { return q.PathMigState.String() }),
		strFilter("state", ib.QPStateNames, func(q *QP) string { return q.State.String() }),
		numFilter("pdn", AttrResPDN, func(q *QP) uint64 { return uint64(q.PDN) }),
		{Name: "dev", Kind: FilterLocation, Extension: true},
		commFilter,
	},
	ResCMID: {
		{Name: "link", Kind: FilterLocation},
		numFilter("lqpn", AttrResLQPN, func(c *CMID) uint64 { return uint64(c.LQPN) }),
		strFilter("qp-type", qpTypeFilterNames, func(c *CMID) string { return c.QPType.String() }),
		strFilter("state", CMStateNames, func(c *CMID) string { return c.State.String() }),
		strFilter("ps", []string{"IPoIB", "TCP", "UDP"}, func(c *CMID) string { return c.PS.RdmaName() }),
		{Name: "dev-type", Kind: FilterString, Unreported: true},
		{Name: "transport-type", Kind: FilterString, Unreported: true},
		pidFilter,
		addrFilter("src-addr", AttrResSrcAddr, func(c *CMID) netip.AddrPort { return c.SrcAddr }),
		portFilter("src-port", AttrResSrcAddr, func(c *CMID) netip.AddrPort { return c.SrcAddr }),
		addrFilter("dst-addr", AttrResDstAddr, func(c *CMID) netip.AddrPort { return c.DstAddr }),
		portFilter("dst-port", AttrResDstAddr, func(c *CMID) netip.AddrPort { return c.DstAddr }),
		idFilter("cm-idn", AttrResCMIDN, func(c *CMID) uint64 { return uint64(c.ID) }),
		{Name: "dev", Kind: FilterLocation, Extension: true},
		commFilter,
	},
	ResCQ: {
		{Name: "dev", Kind: FilterLocation},
		numFilter("users", AttrResUseCnt, func(c *CQ) uint64 { return c.Users }),
		strFilter("poll-ctx", RdmaPollCtxNames, func(c *CQ) string { return c.PollCtx.RdmaName() }),
		pidFilter,
		idFilter("cqn", AttrResCQN, func(c *CQ) uint64 { return uint64(c.CQN) }),
		numFilter("ctxn", AttrResCtxN, func(c *CQ) uint64 { return uint64(c.CtxN) }),
		{Name: "link", Kind: FilterLocation, Extension: true},
		commFilter,
	},
	ResMR: {
		{Name: "dev", Kind: FilterLocation},
		numFilter("rkey", AttrResRKey, func(m *MR) uint64 { return uint64(m.RKey) }),
		numFilter("lkey", AttrResLKey, func(m *MR) uint64 { return uint64(m.LKey) }),
		numFilter("mrlen", AttrResMRLen, func(m *MR) uint64 { return m.Len }),
		pidFilter,
		idFilter("mrn", AttrResMRN, func(m *MR) uint64 { return uint64(m.MRN) }),
		numFilter("pdn", AttrResPDN, func(m *MR) uint64 { return uint64(m.PDN) }),
		{Name: "link", Kind: FilterLocation, Extension: true},
		commFilter,
	},
	ResPD: {
		{Name: "dev", Kind: FilterLocation},
		numFilter("users", AttrResUseCnt, func(d *PD) uint64 { return d.Users }),
		pidFilter,
		numFilter("ctxn", AttrResCtxN, func(d *PD) uint64 { return uint64(d.CtxN) }),
		idFilter("pdn", AttrResPDN, func(d *PD) uint64 { return uint64(d.PDN) }),
		{Name: "link", Kind: FilterLocation, Extension: true},
		commFilter,
	},
	ResCtx: {
		{Name: "dev", Kind: FilterLocation},
		pidFilter,
		idFilter("ctxn", AttrResCtxN, func(c *Ctx) uint64 { return uint64(c.CtxN) }),
		{Name: "link", Kind: FilterLocation, Extension: true},
		commFilter,
	},
	ResSRQ: {
		{Name: "dev", Kind: FilterLocation},
		pidFilter,
		idFilter("srqn", AttrResSRQN, func(s *SRQ) uint64 { return uint64(s.SRQN) }),
		strFilter("type", SRQTypeNames, func(s *SRQ) string { return s.Type.String() }),
		numFilter("pdn", AttrResPDN, func(s *SRQ) uint64 { return uint64(s.PDN) }),
		numFilter("cqn", AttrResCQN, func(s *SRQ) uint64 { return uint64(s.CQN) }),
		{Name: "lqpn", Kind: FilterNumber, qpList: true},
		{Name: "link", Kind: FilterLocation, Extension: true},
		commFilter,
	},
}

// ResFilters returns the filters of `res show` objects of type t, in
// rdma's order (which decides abbreviations), grdma's extensions last:
// the one grammar that parsing, help, completion and man pages use. The
// specs are shared: do not modify them.
func ResFilters(t ResType) []ResFilterSpec { return resFilterTables[t] }

// qpTypeFilterNames are the QP type names a filter accepts.
var qpTypeFilterNames = append(append([]string{}, ib.QPTypeNames...), "DRIVER")

// RdmaName is the port space name rdma prints: RDMA_PS_IB shows as
// "IPoIB" there, and scripts match on it.
func (ps PortSpace) RdmaName() string {
	if ps == PSIB {
		return "IPoIB"
	}
	return ps.String()
}

// RdmaName is the poll context name rdma prints (its table predates Linux
// 5.8: the kernel's UNBOUND_WORKQUEUE shows as WORKQUEUE).
func (p PollCtx) RdmaName() string {
	if int(p) < len(RdmaPollCtxNames) {
		return RdmaPollCtxNames[p]
	}
	return "UNKNOWN"
}

// Filter constructors. T is the object type, e.g. QP; attr is the
// attribute whose presence a numeric value needs (rdma: a numeric filter
// never matches an object lacking the field).

func numFilter[T any, PT interface {
	*T
	ResObject
}](name string, attr Attr, get func(PT) uint64) ResFilterSpec {
	return ResFilterSpec{Name: name, Kind: FilterNumber, num: func(o ResObject) (uint64, bool) {
		p := o.(PT)
		return get(p), p.Res().Has(attr)
	}}
}

func idFilter[T any, PT interface {
	*T
	ResObject
}](name string, attr Attr, get func(PT) uint64) ResFilterSpec {
	f := numFilter(name, attr, get)
	f.ID = true
	return f
}

// strFilter is an enum field; a missing one reads as its zero value (the
// object was reset), which rdma compares too.
func strFilter[T any, PT interface {
	*T
	ResObject
}](name string, values []string, get func(PT) string) ResFilterSpec {
	return ResFilterSpec{Name: name, Kind: FilterString, Values: values, strDefault: true,
		str: func(o ResObject, _ CommFunc) (string, bool) { return get(o.(PT)), true }}
}

// addrFilter matches a CM ID's IP address (src-addr, dst-addr). A CM ID
// without one never matches (rdma compares an uninitialized buffer).
func addrFilter(name string, attr Attr, get func(*CMID) netip.AddrPort) ResFilterSpec {
	return ResFilterSpec{Name: name, Kind: FilterString, normalize: normalizeAddr,
		str: func(o ResObject, _ CommFunc) (string, bool) {
			c := o.(*CMID)
			a := get(c)
			return a.Addr().String(), c.Has(attr) && a.IsValid()
		}}
}

// normalizeAddr checks an address filter value and writes it as the
// kernel's address will be written, so "::FFFF:1.2.3.4" matches.
func normalizeAddr(s string) (string, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return "", fmt.Errorf("%q is not an IP address", s)
	}
	return a.String(), nil
}

// portFilter matches a CM ID's port (src-port, dst-port).
func portFilter(name string, attr Attr, get func(*CMID) netip.AddrPort) ResFilterSpec {
	return ResFilterSpec{Name: name, Kind: FilterNumber, num: func(o ResObject) (uint64, bool) {
		c := o.(*CMID)
		a := get(c)
		return uint64(a.Port()), c.Has(attr) && a.IsValid()
	}}
}

// pidFilter and commFilter apply to every object type.
var (
	pidFilter = ResFilterSpec{Name: "pid", Kind: FilterNumber, num: func(o ResObject) (uint64, bool) {
		r := o.Res()
		return uint64(r.PID), r.Has(AttrResPID)
	}}
	commFilter = ResFilterSpec{Name: "comm", Kind: FilterString, Extension: true,
		str: func(o ResObject, comm CommFunc) (string, bool) { return OwnerName(o.Res(), comm) }}
)

// NumRange is an inclusive range of a numeric filter value.
type NumRange struct{ Lo, Hi uint64 }

// NumList is a numeric filter value: numbers and inclusive ranges.
type NumList []NumRange

// ParseNumList parses a numeric filter value as rdma accepts it: numbers
// and inclusive ranges separated by commas ("1-3,7"). Unlike rdma, values
// are 64-bit, may be hexadecimal (0x1f, as keys are printed), and anything
// malformed is an error rather than a silent non-match.
func ParseNumList(s string) (NumList, error) {
	var out NumList
	for _, item := range strings.Split(s, ",") {
		if item == "" {
			continue // rdma accepts ",1,2"
		}
		loStr, hiStr, isRange := strings.Cut(item, "-")
		lo, err := parseFilterNumber(loStr)
		if err != nil {
			return nil, err
		}
		hi := lo
		if isRange {
			if hi, err = parseFilterNumber(hiStr); err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, fmt.Errorf("range %q runs backwards", item)
			}
		}
		out = append(out, NumRange{lo, hi})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q holds no number", s)
	}
	return out, nil
}

func parseFilterNumber(s string) (uint64, error) {
	base := 10
	digits := s
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		base, digits = 16, s[2:]
	}
	if digits == "" || strings.ContainsAny(digits, "+-_") {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	v, err := strconv.ParseUint(digits, base, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, fmt.Errorf("%q does not fit in 64 bits", s)
		}
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return v, nil
}

// Contains reports whether v is in one of the ranges.
func (l NumList) Contains(v uint64) bool {
	for _, r := range l {
		if r.Lo <= v && v <= r.Hi {
			return true
		}
	}
	return false
}

// single returns the number when the list names exactly one that fits
// in 32 bits.
func (l NumList) single() (uint32, bool) {
	if len(l) != 1 || l[0].Lo != l[0].Hi || l[0].Lo > 0xffffffff {
		return 0, false
	}
	return uint32(l[0].Lo), true
}

// ResFilter is a FILTER VALUE pair of a `res show` command line.
type ResFilter struct {
	Spec *ResFilterSpec
	// Numbers is the value of a numeric filter.
	Numbers NumList
	// Words is the value of a string filter, lower case.
	Words []string
	// also are the other filters of rdma's table the key abbreviates:
	// rdma checks every field whose name starts with the key (utils.c
	// rd_check_is_filtered compares keys with strcmpx), so "res show qp
	// p 5" asks for pid 5, path-mig-state "5" and pdn 5 at once.
	also []ResFilter
}

// ParseResFilter checks a FILTER VALUE pair against its spec.
func ParseResFilter(spec *ResFilterSpec, value string) (ResFilter, error) {
	f := ResFilter{Spec: spec}
	if spec.Kind == FilterNumber {
		r, err := ParseNumList(value)
		if err != nil {
			return f, syntaxf("bad %s filter: %v (use numbers and ranges, e.g. 1-3,7)", spec.Name, err)
		}
		f.Numbers = r
		return f, nil
	}
	for _, w := range strings.Split(value, ",") {
		if w == "" {
			continue
		}
		if spec.Values != nil && !containsFold(spec.Values, w) {
			return f, syntaxf("bad %s filter: unknown value %q (expected %s)", spec.Name, w, strings.Join(spec.Values, ", "))
		}
		if spec.normalize != nil {
			var err error
			if w, err = spec.normalize(w); err != nil {
				return f, syntaxf("bad %s filter: %v", spec.Name, err)
			}
		}
		f.Words = append(f.Words, strings.ToLower(w))
	}
	if len(f.Words) == 0 {
		return f, syntaxf("bad %s filter: no value", spec.Name)
	}
	return f, nil
}

// parseAlso reads value as rdma would for another field the key
// abbreviates: a value that does not fit the field matches nothing.
func parseAlso(spec *ResFilterSpec, value string) ResFilter {
	f := ResFilter{Spec: spec}
	if spec.Kind == FilterNumber {
		f.Numbers, _ = ParseNumList(value)
		if f.Numbers == nil {
			f.Numbers = NumList{} // matches nothing
		}
		return f
	}
	for _, w := range strings.Split(value, ",") {
		if w != "" {
			if spec.normalize != nil {
				if n, err := spec.normalize(w); err == nil {
					w = n
				}
			}
			f.Words = append(f.Words, strings.ToLower(w))
		}
	}
	return f
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// Match reports whether object o passes the filter. A numeric field the
// object lacks never matches; a string field it lacks compares the
// field's zero value, as rdma does (path-mig-state of a UD QP is
// "MIGRATED" to the filter); comm and addresses it lacks never match.
func (f *ResFilter) Match(o ResObject, comm CommFunc) bool {
	for i := range f.also {
		if !f.also[i].Match(o, comm) {
			return false
		}
	}
	s := f.Spec
	switch {
	case s.qpList || s.Unreported:
		return true // qpList: applied to the SRQ's QP list when rendering
	case s.num != nil:
		v, ok := s.num(o)
		return ok && f.Numbers.Contains(v)
	}
	v, ok := s.str(o, comm)
	if !ok {
		return false
	}
	v = strings.ToLower(v)
	for _, w := range f.Words {
		if w == v {
			return true
		}
	}
	return false
}

// IsQPList reports whether f is the SRQ lqpn filter, which selects the
// QPs shown inside each SRQ rather than SRQs.
func (f *ResFilter) IsQPList() bool { return f.Spec.qpList }
