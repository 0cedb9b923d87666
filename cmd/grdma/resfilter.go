package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/grdma/grdma/nldev"
)

// numRange is an inclusive range of a numeric filter.
type numRange struct{ lo, hi uint64 }

// parseNumList parses a numeric filter value as rdma accepts it: numbers
// and inclusive ranges separated by commas ("1-3,7"). Unlike rdma, values
// are 64-bit, may be hexadecimal (0x1f, as keys are printed), and anything
// malformed is an error rather than a silent non-match.
func parseNumList(s string) ([]numRange, error) {
	var out []numRange
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
		out = append(out, numRange{lo, hi})
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

func matchNum(ranges []numRange, v uint64) bool {
	for _, r := range ranges {
		if r.lo <= v && v <= r.hi {
			return true
		}
	}
	return false
}

// filterSpec is one FILTER of an object: how to read its value from an
// object. An attribute the object lacks never matches (rdma matches some
// string filters against a default value instead).
type filterSpec struct {
	key string
	// num reads a numeric field; ok is false when the kernel did not send it.
	num func(o nldev.ResObject) (v uint64, ok bool)
	// str reads a string field, matched case-insensitively.
	str func(o nldev.ResObject, comm commLookup) (v string, ok bool)
	// names, when set, are the only values a string filter accepts.
	names []string
	// normalize, when set, checks and rewrites each string filter value.
	normalize func(string) (string, error)
	// id marks the object's number: one plain value is looked up directly.
	id bool
	// qpList marks the SRQ lqpn filter, which picks QPs inside each SRQ.
	qpList bool
}

// filter is a FILTER VALUE pair of a command line.
type filter struct {
	spec   *filterSpec
	ranges []numRange // numeric filters
	words  []string   // string filters, lower case
}

func (f *filter) match(o nldev.ResObject, comm commLookup) bool {
	if f.spec.qpList {
		return true // applied to the SRQ's QP list when rendering
	}
	if f.spec.num != nil {
		v, ok := f.spec.num(o)
		return ok && matchNum(f.ranges, v)
	}
	v, ok := f.spec.str(o, comm)
	if !ok {
		return false
	}
	v = strings.ToLower(v)
	for _, w := range f.words {
		if w == v {
			return true
		}
	}
	return false
}

// singleID returns the object number when the filter names exactly one.
func (f *filter) singleID() (uint32, bool) {
	if !f.spec.id || len(f.ranges) != 1 || f.ranges[0].lo != f.ranges[0].hi || f.ranges[0].lo > 0xffffffff {
		return 0, false
	}
	return uint32(f.ranges[0].lo), true
}

// parseFilter checks a FILTER VALUE pair.
func parseFilter(help string, spec *filterSpec, value string) (filter, error) {
	f := filter{spec: spec}
	if spec.num != nil || spec.qpList {
		r, err := parseNumList(value)
		if err != nil {
			return f, usagef(help, "bad %s filter: %v (use numbers and ranges, e.g. 1-3,7)", spec.key, err)
		}
		f.ranges = r
		return f, nil
	}
	for _, w := range strings.Split(value, ",") {
		if w == "" {
			continue
		}
		if spec.names != nil && !containsFold(spec.names, w) {
			return f, usagef(help, "bad %s filter: unknown value %q (expected %s)", spec.key, w, strings.Join(spec.names, ", "))
		}
		if spec.normalize != nil {
			var err error
			if w, err = spec.normalize(w); err != nil {
				return f, usagef(help, "bad %s filter: %v", spec.key, err)
			}
		}
		f.words = append(f.words, strings.ToLower(w))
	}
	if len(f.words) == 0 {
		return f, usagef(help, "bad %s filter: no value", spec.key)
	}
	return f, nil
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// Filter constructors for the common shapes. T is the object type, e.g.
// nldev.QP; attr is the attribute whose presence the value needs.

func numFilter[T any, PT interface {
	*T
	nldev.ResObject
}](key string, attr nldev.Attr, get func(PT) uint64) filterSpec {
	return filterSpec{key: key, num: func(o nldev.ResObject) (uint64, bool) {
		p := o.(PT)
		return get(p), p.Res().Has(attr)
	}}
}

func idFilter[T any, PT interface {
	*T
	nldev.ResObject
}](key string, attr nldev.Attr, get func(PT) uint64) filterSpec {
	f := numFilter(key, attr, get)
	f.id = true
	return f
}

func strFilter[T any, PT interface {
	*T
	nldev.ResObject
}](key string, attr nldev.Attr, names []string, get func(PT) string) filterSpec {
	return filterSpec{key: key, names: names, str: func(o nldev.ResObject, _ commLookup) (string, bool) {
		p := o.(PT)
		return get(p), p.Res().Has(attr)
	}}
}

// pidFilter and commFilter apply to every object type.
var (
	pidFilter = filterSpec{key: "pid", num: func(o nldev.ResObject) (uint64, bool) {
		r := o.Res()
		return uint64(r.PID), r.Has(nldev.AttrResPID)
	}}
	commFilter = filterSpec{key: "comm", str: func(o nldev.ResObject, comm commLookup) (string, bool) {
		return ownerName(o.Res(), comm)
	}}
)
