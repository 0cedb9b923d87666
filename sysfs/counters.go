package sysfs

import (
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
)

// PMACounter is one InfiniBand PMA port counter (ports/P/counters/NAME).
type PMACounter struct {
	Name  string
	Value uint64
}

// pmaWords are the PMA data counters the kernel reports in 4-byte words.
var pmaWords = map[string]bool{
	"port_xmit_data": true, "port_rcv_data": true,
	"port_xmit_data_64": true, "port_rcv_data_64": true,
}

// parsePMAValue parses the text of counter name, in bytes for the data
// counters the kernel reports in 4-byte words; a word count too large for
// a byte count in 64 bits is refused rather than wrapped.
func parsePMAValue(name, text string) (uint64, bool) {
	v, err := strconv.ParseUint(strings.TrimSpace(text), 10, 64)
	if err != nil {
		return 0, false
	}
	if pmaWords[name] {
		if v > math.MaxUint64/4 {
			return 0, false
		}
		v *= 4
	}
	return v, true
}

// PMACounters reads the PMA counters of a port, sorted by name, with the
// data counters (port_xmit_data, port_rcv_data) converted from 4-byte
// words to bytes. Counters the device cannot read ("N/A (no PMA)", EINVAL)
// are left out; a port without a counters/ directory (rxe, RoCE on many
// drivers) has none. Equivalent to `perfquery` without MADs.
func (f FS) PMACounters(dev string, port uint32) ([]PMACounter, error) {
	if err := CheckName("RDMA device", dev); err != nil {
		return nil, err
	}
	dir := path.Join("sys/class/infiniband", dev, "ports", strconv.FormatUint(uint64(port), 10), "counters")
	entries, err := f.ReadDir(dir)
	if err != nil {
		if IsGone(err) {
			return nil, nil
		}
		return nil, err
	}
	var out []PMACounter
	for _, e := range entries {
		s, err := f.ReadAttr(path.Join(strings.TrimPrefix(dir, "sys/"), e.Name()))
		if err != nil {
			continue // unreadable counters are absent, as for the kernel
		}
		v, ok := parsePMAValue(e.Name(), s)
		if !ok {
			continue // "N/A (no PMA)"
		}
		out = append(out, PMACounter{Name: e.Name(), Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// PMACounter reads one PMA counter of a port (ports/P/counters/NAME),
// converted as PMACounters converts it. ok is false when the port has no
// such counter (no counters/ directory: rxe, RoCE on many drivers), the
// device cannot read it (EINVAL, "N/A (no PMA)") or it has gone away.
// Each read of a PMA counter is a MAD the kernel sends to the device's
// firmware, so a reader that needs a few reads those alone.
func (f FS) PMACounter(dev string, port uint32, name string) (v uint64, ok bool, err error) {
	if err := CheckName("RDMA device", dev); err != nil {
		return 0, false, err
	}
	if err := CheckName("PMA counter", name); err != nil {
		return 0, false, err
	}
	s, err := f.ReadAttr(path.Join("class/infiniband", dev, "ports", strconv.FormatUint(uint64(port), 10), "counters", name))
	switch {
	case err == nil:
	case IsGone(err) || isNoEntry(err):
		return 0, false, nil
	default:
		return 0, false, err
	}
	v, ok = parsePMAValue(name, s)
	return v, ok, nil
}
