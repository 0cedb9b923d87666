package grammar

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/nldev"
)

// ResFilterKind is what a FILTER of `res show OBJECT` takes as its value.
type ResFilterKind uint8

// Filter kinds.
const (
	// FilterLocation is dev DEV or link DEV[/PORT|/-]: it picks the
	// device and port to ask, not a field.
	FilterLocation ResFilterKind = iota
	// FilterNumber takes numbers and inclusive ranges, comma separated
	// ("1-3,7"), decimal or 0x hexadecimal, 64-bit (ParseNumList).
	FilterNumber
	// FilterString takes a comma list of words, matched case-insensitively
	// (from Values when the filter has any).
	FilterString
)

// ResFilterSpec is one FILTER word of `res show OBJECT`, as an entry of
// iproute2's res.h filter tables. ResFilters lists them per object.
type ResFilterSpec struct {
	Name  string
	Kind  ResFilterKind
	Field nldev.ResField // the field compared; 0 for a location or Unreported
	// Values are the only values a string filter accepts (enum names);
	// nil means any word.
	Values []string
	// Extension marks a filter that is grdma's, not rdma's (comm, and dev
	// or link where rdma has only the other).
	Extension bool
	// Unreported marks a filter rdma accepts although the kernel reports
	// no such field (cm_id dev-type, transport-type): it matches every
	// object, as in rdma.
	Unreported bool
	// address: the value is an IP address, written as the kernel's
	// address will be (so "::FFFF:1.2.3.4" matches).
	address bool
}

// resFilterTables are the filters of each object, in rdma's order (the
// order decides what an abbreviation means), grdma's extensions last.
var resFilterTables = map[nldev.ResType][]ResFilterSpec{
	nldev.ResQP: {
		{Name: "link", Kind: FilterLocation},
		num("lqpn", nldev.FieldLQPN),
		num("rqpn", nldev.FieldRQPN),
		num("pid", nldev.FieldPID),
		num("sq-psn", nldev.FieldSQPSN),
		num("rq-psn", nldev.FieldRQPSN),
		str("type", nldev.FieldQPType, qpTypeNames),
		str("path-mig-state", nldev.FieldPathMigState, nldev.PathMigStateNames),
		str("state", nldev.FieldState, ib.QPStateNames),
		num("pdn", nldev.FieldPDN),
		{Name: "dev", Kind: FilterLocation, Extension: true},
		commFilter,
	},
	nldev.ResCMID: {
		{Name: "link", Kind: FilterLocation},
		num("lqpn", nldev.FieldLQPN),
		str("qp-type", nldev.FieldQPType, qpTypeNames),
		str("state", nldev.FieldState, nldev.CMStateNames),
		str("ps", nldev.FieldPS, []string{"IPoIB", "TCP", "UDP"}),
		{Name: "dev-type", Kind: FilterString, Unreported: true},
		{Name: "transport-type", Kind: FilterString, Unreported: true},
		num("pid", nldev.FieldPID),
		{Name: "src-addr", Kind: FilterString, Field: nldev.FieldSrcAddr, address: true},
		num("src-port", nldev.FieldSrcPort),
		{Name: "dst-addr", Kind: FilterString, Field: nldev.FieldDstAddr, address: true},
		num("dst-port", nldev.FieldDstPort),
		num("cm-idn", nldev.FieldCMIDN),
		{Name: "dev", Kind: FilterLocation, Extension: true},
		commFilter,
	},
	nldev.ResCQ: {
		{Name: "dev", Kind: FilterLocation},
		num("users", nldev.FieldUsers),
		str("poll-ctx", nldev.FieldPollCtx, nldev.RdmaPollCtxNames),
		num("pid", nldev.FieldPID),
		num("cqn", nldev.FieldCQN),
		num("ctxn", nldev.FieldCtxN),
		{Name: "link", Kind: FilterLocation, Extension: true},
		commFilter,
	},
	nldev.ResMR: {
		{Name: "dev", Kind: FilterLocation},
		num("rkey", nldev.FieldRKey),
		num("lkey", nldev.FieldLKey),
		num("mrlen", nldev.FieldMRLen),
		num("pid", nldev.FieldPID),
		num("mrn", nldev.FieldMRN),
		num("pdn", nldev.FieldPDN),
		{Name: "link", Kind: FilterLocation, Extension: true},
		commFilter,
	},
	nldev.ResPD: {
		{Name: "dev", Kind: FilterLocation},
		num("users", nldev.FieldUsers),
		num("pid", nldev.FieldPID),
		num("ctxn", nldev.FieldCtxN),
		num("pdn", nldev.FieldPDN),
		{Name: "link", Kind: FilterLocation, Extension: true},
		commFilter,
	},
	nldev.ResCtx: {
		{Name: "dev", Kind: FilterLocation},
		num("pid", nldev.FieldPID),
		num("ctxn", nldev.FieldCtxN),
		{Name: "link", Kind: FilterLocation, Extension: true},
		commFilter,
	},
	nldev.ResSRQ: {
		{Name: "dev", Kind: FilterLocation},
		num("pid", nldev.FieldPID),
		num("srqn", nldev.FieldSRQN),
		str("type", nldev.FieldSRQType, nldev.SRQTypeNames),
		num("pdn", nldev.FieldPDN),
		num("cqn", nldev.FieldCQN),
		num("lqpn", nldev.FieldLQPN), // the QPs shown inside each SRQ
		{Name: "link", Kind: FilterLocation, Extension: true},
		commFilter,
	},
}

// qpTypeNames are the QP type names a filter accepts.
var qpTypeNames = append(slices.Clone(ib.QPTypeNames), "DRIVER")

var commFilter = ResFilterSpec{Name: "comm", Kind: FilterString, Field: nldev.FieldComm, Extension: true}

func num(name string, f nldev.ResField) ResFilterSpec {
	return ResFilterSpec{Name: name, Kind: FilterNumber, Field: f}
}

func str(name string, f nldev.ResField, values []string) ResFilterSpec {
	return ResFilterSpec{Name: name, Kind: FilterString, Field: f, Values: values}
}

// ResFilters returns the filters of `res show` objects of type t, in
// rdma's order (which decides abbreviations), grdma's extensions last:
// the one table that parsing, help, completion and man pages use. The
// specs are shared: do not modify them.
func ResFilters(t nldev.ResType) []ResFilterSpec { return resFilterTables[t] }

// ResTypeNames are the object words of `res show`, in rdma's order.
func ResTypeNames() []string {
	names := make([]string, len(nldev.ResTypes))
	for i, t := range nldev.ResTypes {
		names[i] = t.String()
	}
	return names
}

// ParseResType resolves an object word of `res show` (abbreviable as in
// rdma: "c" is cm_id, the first of rdma's objects starting with c).
func ParseResType(word string) (nldev.ResType, bool) {
	name, ok := cmdline.Abbrev(word, ResTypeNames())
	if !ok {
		return 0, false
	}
	return nldev.ResTypes[slices.Index(ResTypeNames(), name)], true
}

// ParseResSelect reads the words after `res show OBJECT`: [dev DEV | link
// DEV[/PORT|/-]] and FILTER VALUE pairs in any order, keys abbreviated as
// rdma abbreviates them: a word abbreviating dev or link picks the device,
// any other the first filter of the object's table, in ResFilters order,
// that the word starts. Errors are *cmdline.UsageError.
func ParseResSelect(t nldev.ResType, words []string) (nldev.ResSelect, error) {
	sel := nldev.ResSelect{Type: t}
	specs := ResFilters(t)
	names := make([]string, len(specs))
	for i := range specs {
		names[i] = specs[i].Name
	}
	seen := map[string]bool{}
	for len(words) > 0 {
		// rdma (rd_set_arg_to_devname) takes any key abbreviating dev
		// or link as the device, whatever filter it matched first
		// (cm_id "d" is dev-type, yet names the device).
		key := words[0]
		name, ok := cmdline.Abbrev(key, []string{"dev", "link"})
		if !ok {
			name, ok = cmdline.Abbrev(key, names)
		}
		if !ok {
			return sel, usagef("unknown filter %q: expected %s", key, strings.Join(names, ", "))
		}
		if len(words) < 2 {
			return sel, usagef("missing %s value", name)
		}
		value := words[1]
		words = words[2:]
		if seen[name] || (name == "dev" || name == "link") && (seen["dev"] || seen["link"]) {
			return sel, usagef("%s given twice", name)
		}
		seen[name] = true
		i := slices.Index(names, name)
		if specs[i].Kind == FilterLocation {
			if err := parseLocation(&sel, name, value); err != nil {
				return sel, err
			}
			continue
		}
		f, err := parseResFilter(&specs[i], value)
		if err != nil {
			return sel, err
		}
		if !specs[i].Unreported {
			sel.Filters = append(sel.Filters, f)
		}
		if key != name {
			// An abbreviation: rdma checks every field whose name
			// starts with the key (utils.c rd_check_is_filtered compares
			// keys with strcmpx), so "res show qp p 5" asks for pid 5,
			// path-mig-state "5" and pdn 5 at once; a value that does
			// not fit one of them matches nothing. grdma's extensions
			// aside.
			for j := i + 1; j < len(specs); j++ {
				if sp := &specs[j]; strings.HasPrefix(sp.Name, key) && sp.Kind != FilterLocation && !sp.Extension && !sp.Unreported {
					sel.Filters = append(sel.Filters, parseAlso(sp, value))
				}
			}
		}
	}
	return sel, nil
}

// parseLocation reads the device (and port) of dev DEV / link DEV/PORT.
func parseLocation(sel *nldev.ResSelect, key, value string) error {
	t := sel.Type
	dev, port, hasSlash := strings.Cut(value, "/")
	if dev == "" {
		return usagef("missing device name in %q", value)
	}
	if port == "-" && key == "link" {
		if !t.PerPort() {
			return usagef("%s objects have no port: use dev %s", t, dev)
		}
		sel.Device, sel.Portless = dev, true
		return nil
	}
	var n uint64
	if hasSlash && port != "" {
		var err error
		n, err = strconv.ParseUint(port, 10, 32)
		if err != nil || n == 0 {
			return usagef("invalid port %q in %q: ports are numbered from 1", port, value)
		}
	}
	if n != 0 && (key == "dev" || !t.PerPort()) {
		return usagef("%s objects belong to a device, not a port: use dev %s", t, dev)
	}
	sel.Device, sel.Port = dev, uint32(n)
	return nil
}

// parseResFilter checks a FILTER VALUE pair against its spec.
func parseResFilter(spec *ResFilterSpec, value string) (nldev.ResFilter, error) {
	f := nldev.ResFilter{Field: spec.Field}
	if spec.Kind == FilterNumber {
		r, err := ParseNumList(value)
		if err != nil {
			return f, usagef("bad %s filter: %v (use numbers and ranges, e.g. 1-3,7)", spec.Name, err)
		}
		f.Numbers = r
		return f, nil
	}
	for _, w := range strings.Split(value, ",") {
		if w == "" {
			continue
		}
		if spec.Values != nil && !containsFold(spec.Values, w) {
			return f, usagef("bad %s filter: unknown value %q (expected %s)", spec.Name, w, strings.Join(spec.Values, ", "))
		}
		if spec.address {
			a, err := netip.ParseAddr(w)
			if err != nil {
				return f, usagef("bad %s filter: %q is not an IP address", spec.Name, w)
			}
			w = a.String()
		}
		f.Words = append(f.Words, strings.ToLower(w))
	}
	if len(f.Words) == 0 {
		return f, usagef("bad %s filter: no value", spec.Name)
	}
	return f, nil
}

// parseAlso reads value as rdma would for another field the key
// abbreviates: a value that does not fit the field matches nothing.
func parseAlso(spec *ResFilterSpec, value string) nldev.ResFilter {
	f := nldev.ResFilter{Field: spec.Field}
	if spec.Kind == FilterNumber {
		f.Numbers, _ = ParseNumList(value)
		if f.Numbers == nil {
			f.Numbers = nldev.NumList{} // matches nothing
		}
		return f
	}
	for _, w := range strings.Split(value, ",") {
		if w != "" {
			if a, err := netip.ParseAddr(w); spec.address && err == nil {
				w = a.String()
			}
			f.Words = append(f.Words, strings.ToLower(w))
		}
	}
	return f
}

func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(v string) bool { return strings.EqualFold(v, s) })
}

// ParseNumList parses a numeric filter value as rdma accepts it: numbers
// and inclusive ranges separated by commas ("1-3,7"). Unlike rdma, values
// are 64-bit, may be hexadecimal (0x1f, as keys are printed), and anything
// malformed is an error rather than a silent non-match.
func ParseNumList(s string) (nldev.NumList, error) {
	var out nldev.NumList
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
		out = append(out, nldev.NumRange{Lo: lo, Hi: hi})
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

// FRMRPoolFilters are the filters of `res show frmr_pools`, in rdma's
// order after dev (all numeric).
var FRMRPoolFilters = []struct {
	Name  string
	Field nldev.FRMRPoolField
}{
	{"ats", nldev.FRMRPoolATS}, {"access_flags", nldev.FRMRPoolAccessFlags}, {"vendor_key", nldev.FRMRPoolVendorKey},
	{"num_dma_blocks", nldev.FRMRPoolNumDMABlocks}, {"queue", nldev.FRMRPoolQueue}, {"in_use", nldev.FRMRPoolInUse},
	{"max_in_use", nldev.FRMRPoolMaxInUse}, {"pinned", nldev.FRMRPoolPinned},
}

// ParseFRMRPoolSelect reads the words after `res show frmr_pools`,
// abbreviated as rdma abbreviates them. Errors are *cmdline.UsageError.
func ParseFRMRPoolSelect(words []string) (nldev.FRMRPoolSelect, error) {
	sel := nldev.FRMRPoolSelect{Filters: map[nldev.FRMRPoolField]nldev.NumList{}}
	names := []string{"dev"}
	for _, f := range FRMRPoolFilters {
		names = append(names, f.Name)
	}
	seen := map[string]bool{}
	for len(words) > 0 {
		name, ok := cmdline.Abbrev(words[0], names)
		if !ok {
			return sel, usagef("unknown filter %q: expected %s", words[0], strings.Join(names, ", "))
		}
		if len(words) < 2 {
			return sel, usagef("missing %s value", name)
		}
		value := words[1]
		words = words[2:]
		if seen[name] {
			return sel, usagef("%s given twice", name)
		}
		seen[name] = true
		if name == "dev" {
			sel.Device = value
			continue
		}
		l, err := ParseNumList(value)
		if err != nil {
			return sel, usagef("bad %s filter: %v (use numbers and ranges, e.g. 1-3,7)", name, err)
		}
		sel.Filters[FRMRPoolFilters[slices.Index(names, name)-1].Field] = l
	}
	return sel, nil
}

// usagef is a usage error that names no help: the caller adds its own
// (cmdline.WithHelp).
func usagef(format string, args ...any) error { return cmdline.Usagef("", format, args...) }

// ParseFRMRPoolKey parses rdma's pool key text
// vendor_key:num_dma_blocks:access_flags:ats (hexadecimal; ats 0 or 1;
// further fields must be 0). Errors are *cmdline.UsageError.
func ParseFRMRPoolKey(s string) (nldev.FRMRPoolKey, error) {
	var k nldev.FRMRPoolKey
	fields := strings.Split(s, ":")
	if len(fields) < 4 {
		return k, usagef("invalid pool key %q: expected 4 fields vendor_key:num_dma_blocks:access_flags:ats", s)
	}
	for i, f := range fields {
		v, err := strconv.ParseUint(f, 16, 64)
		if err != nil {
			return k, usagef("invalid pool key %q: field %d (%q) is not a hexadecimal number", s, i+1, f)
		}
		switch i {
		case 0:
			k.VendorKey = v
		case 1:
			k.NumDMABlocks = v
		case 2:
			if v > 0xffffffff {
				return k, usagef("invalid pool key %q: access_flags does not fit in 32 bits", s)
			}
			k.AccessFlags = uint32(v)
		case 3:
			if v > 1 {
				return k, usagef("invalid pool key %q: ats is 0 or 1", s)
			}
			k.ATS = v == 1
		default:
			if v != 0 {
				return k, usagef("invalid pool key %q: unsupported pool attributes after the fourth field", s)
			}
		}
	}
	return k, nil
}
