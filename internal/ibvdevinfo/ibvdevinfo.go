// Package ibvdevinfo parses what `ibv_devinfo -v` prints and compares it,
// field by field, with what package devinfo read: the check of the unit
// tests (on recorded output) and of the guest scenario (live).
package ibvdevinfo

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/grdma/grdma/devinfo"
)

// Section is a device or a port: its fields by key, as printed, and the
// names listed under flag fields.
type Section struct {
	Values map[string]string
	Names  map[string][]string
}

// Device is one hca_id block.
type Device struct {
	Name string
	Section
	Ports []Port
}

// Port is one port block.
type Port struct {
	Num int
	Section
	GIDs []string // "0 fe80::1, RoCE v2"
}

func newSection() Section { return Section{Values: map[string]string{}, Names: map[string][]string{}} }

// Parse parses the output of `ibv_devinfo -v`. Keys are normalized to
// package devinfo's: the nested sections' repeated names get the tso_,
// rss_, packet_pacing_ and tm_ prefixes, and the "not supported" lines
// record zeros.
func Parse(text string) ([]Device, error) {
	var devs []Device
	var cur *Section
	section, lastKey := "", ""
	for _, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" {
			continue
		}
		if name, ok := strings.CutPrefix(line, "hca_id:"); ok {
			devs = append(devs, Device{Name: strings.TrimSpace(name), Section: newSection()})
			cur, section, lastKey = &devs[len(devs)-1].Section, "", ""
			continue
		}
		if len(devs) == 0 {
			return nil, fmt.Errorf("line %q before any hca_id", line)
		}
		d := &devs[len(devs)-1]
		if n, ok := strings.CutPrefix(line, "port:"); ok {
			num, err := strconv.Atoi(strings.TrimSpace(n))
			if err != nil {
				return nil, fmt.Errorf("port line %q", line)
			}
			d.Ports = append(d.Ports, Port{Num: num, Section: newSection()})
			cur, section, lastKey = &d.Ports[len(d.Ports)-1].Section, "", ""
			continue
		}
		if strings.HasPrefix(line, "GID[") {
			idx, rest, _ := strings.Cut(strings.TrimPrefix(line, "GID["), "]:")
			p := &d.Ports[len(d.Ports)-1]
			p.GIDs = append(p.GIDs, strings.TrimSpace(idx)+" "+strings.TrimSpace(rest))
			continue
		}
		if strings.HasPrefix(raw, "\t\t\t\t\t") { // a name under a flag field
			cur.Names[lastKey] = append(cur.Names[lastKey], line)
			continue
		}
		switch line {
		case "completion_timestamp_mask not supported":
			cur.Values["completion_timestamp_mask"] = "0"
			continue
		case "core clock not supported":
			cur.Values["hca_core_clock"] = "0"
			continue
		case "tag matching not supported":
			cur.Values["max_num_tags"] = "0"
			continue
		}
		label, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("unknown line %q", line)
		}
		value = strings.TrimSpace(value)
		switch label {
		case "tso_caps", "rss_caps", "packet_pacing_caps", "cq moderation caps":
			section = label
			continue
		case "max_rndv_hdr_size":
			section = "tm"
		}
		key := label
		switch {
		case label == "supported_qp":
			key = map[string]string{"tso_caps": "tso_supported_qp", "rss_caps": "rss_supported_qp",
				"packet_pacing_caps": "packet_pacing_supported_qp"}[section]
		case section == "tm" && (label == "max_sge" || label == "flags"):
			key = "tm_" + label
		case label == "completion timestamp_mask":
			key = "completion_timestamp_mask"
		case label == "maximum available device memory":
			key = "max_dm_size"
		case label == "raw packet caps":
			key = "raw_packet_caps"
		}
		for _, unit := range []string{"kHZ", "kbps", " us", "Bytes"} {
			value = strings.TrimSuffix(value, unit)
		}
		cur.Values[key] = value
		lastKey = key
	}
	return devs, nil
}

// optional are the keys ibv_devinfo leaves out under some condition or in
// some versions; a key it leaves out otherwise must be zero in grdma's.
var optional = []string{"board_id", "phys_state", "port_cap_flags2", "num_comp_vectors", "max_cq_count",
	"max_cq_period", "max_map_per_fmr", "max_srq_wr", "max_srq_sge", "max_rndv_hdr_size", "max_ops",
	"tm_max_sge", "tm_flags", "fw_ver"}

// Compare returns the differences between what ibv_devinfo printed and
// what devinfo read, one line each; none when every field, port and GID
// agrees.
func Compare(ibv Device, d *devinfo.Device) []string {
	var diffs []string
	if ibv.Name != d.Name {
		return []string{fmt.Sprintf("device %s, ibv_devinfo %s", d.Name, ibv.Name)}
	}
	diffs = append(diffs, compareFields(d.Name, ibv.Section, d.Fields())...)
	if len(ibv.Ports) != len(d.Ports) {
		return append(diffs, fmt.Sprintf("%s: %d ports, ibv_devinfo %d", d.Name, len(d.Ports), len(ibv.Ports)))
	}
	for i, ip := range ibv.Ports {
		p := &d.Ports[i]
		where := fmt.Sprintf("%s/%d", d.Name, p.Port)
		if int(p.Port) != ip.Num {
			diffs = append(diffs, fmt.Sprintf("%s: ibv_devinfo port %d", where, ip.Num))
			continue
		}
		diffs = append(diffs, compareFields(where, ip.Section, p.Fields())...)
		var gids []string
		for _, g := range p.GIDs {
			gids = append(gids, fmt.Sprintf("%d %s, %s", g.Index, g.GID, g.Type))
		}
		if !slices.Equal(gids, ip.GIDs) {
			diffs = append(diffs, fmt.Sprintf("%s: GIDs %q, ibv_devinfo %q", where, gids, ip.GIDs))
		}
	}
	return diffs
}

func compareFields(where string, ibv Section, fields []devinfo.Field) []string {
	var diffs []string
	seen := map[string]bool{}
	for _, f := range fields {
		seen[f.Key] = true
		v, ok := ibv.Values[f.Key]
		if !ok {
			if !slices.Contains(optional, f.Key) && !zero(f) {
				diffs = append(diffs, fmt.Sprintf("%s: %s %s, not shown by ibv_devinfo", where, f.Key, show(f)))
			}
			continue
		}
		if problem := compareField(f, v, ibv.Names[f.Key]); problem != "" {
			diffs = append(diffs, fmt.Sprintf("%s: %s %s, ibv_devinfo %q: %s", where, f.Key, show(f), v, problem))
		}
	}
	for k := range ibv.Values {
		if !seen[k] {
			diffs = append(diffs, fmt.Sprintf("%s: ibv_devinfo shows %s %q, grdma has no such field", where, k, ibv.Values[k]))
		}
	}
	return diffs
}

func zero(f devinfo.Field) bool {
	return f.Num == 0 && f.Size == 0 && f.Str == "" && (len(f.Names) == 0 || f.Names[0] == "NO SUPPORT")
}

func show(f devinfo.Field) string {
	switch f.Kind {
	case devinfo.String:
		return strconv.Quote(f.Str)
	case devinfo.Enum:
		return fmt.Sprintf("%s (%d)", f.Str, f.Num)
	case devinfo.NumberEnum:
		return fmt.Sprintf("%d (%d)", f.Size, f.Num)
	case devinfo.Flags:
		return fmt.Sprintf("%#x %q", f.Num, f.Names)
	}
	return strconv.FormatUint(f.Num, 10)
}

func compareField(f devinfo.Field, v string, names []string) string {
	switch f.Kind {
	case devinfo.String:
		if v != f.Str {
			return "differs"
		}
	case devinfo.Number, devinfo.Hex:
		n, err := parseNumber(v)
		if err != nil || n != f.Num {
			return "differs"
		}
	case devinfo.Enum, devinfo.NumberEnum:
		name, code, ok := strings.Cut(v, " (")
		want := f.Str
		if f.Kind == devinfo.NumberEnum {
			want = strconv.FormatUint(f.Size, 10)
		}
		if f.Key == "active_width" {
			want = strings.TrimSuffix(f.Str, "X") + "X"
		}
		if !ok || name != want || code != strconv.FormatUint(f.Num, 10)+")" {
			return "differs"
		}
	case devinfo.Flags:
		if v != "" {
			if n, err := parseNumber(v); err != nil || n != f.Num {
				return "value differs"
			}
		}
		if !slices.Equal(names, f.Names) && !(len(names) == 0 && len(f.Names) == 0) {
			return fmt.Sprintf("names %q", names)
		}
	}
	return ""
}

// parseNumber parses ibv_devinfo's 0x%x, %d (an int: negative beyond
// 2^31) and %u.
func parseNumber(s string) (uint64, error) {
	if h, ok := strings.CutPrefix(s, "0x"); ok {
		return strconv.ParseUint(h, 16, 64)
	}
	if strings.HasPrefix(s, "-") {
		n, err := strconv.ParseInt(s, 10, 32)
		return uint64(uint32(int32(n))), err
	}
	return strconv.ParseUint(s, 10, 64)
}

// jsonExtras are the keys of `grdma -j dev info` that ibv_devinfo has no
// counterpart for (checked by the callers against other sources).
var jsonExtras = []string{"ifindex", "hca_id", "driver", "parent", "uverbs", "rdma_cm", "source", "note", "ports",
	"port", "netdev", "netdev_ifindex", "netdev_operstate", "umad", "issm", "mtu_source", "gids"}

// FieldsFromJSON turns one object of `grdma -j dev info` (a device or a
// port) back into fields: a key with KEY_names is a flag word, with
// KEY_value an enum (a number: NumberEnum), other numbers are numbers.
func FieldsFromJSON(obj map[string]any) []devinfo.Field {
	var fs []devinfo.Field
	for k, v := range obj {
		if slices.Contains(jsonExtras, k) || strings.HasSuffix(k, "_value") || strings.HasSuffix(k, "_names") {
			continue
		}
		f := devinfo.Field{Key: k}
		switch v := v.(type) {
		case string:
			f.Kind, f.Str = devinfo.String, v
		case float64:
			f.Kind, f.Num = devinfo.Number, uint64(v)
		}
		if code, ok := obj[k+"_value"].(float64); ok {
			if f.Kind == devinfo.String {
				f.Kind, f.Num = devinfo.Enum, uint64(code)
			} else {
				f.Kind, f.Size, f.Num = devinfo.NumberEnum, f.Num, uint64(code)
			}
		}
		if names, ok := obj[k+"_names"].([]any); ok {
			f.Kind = devinfo.Flags
			for _, n := range names {
				s, _ := n.(string)
				f.Names = append(f.Names, s)
			}
		}
		fs = append(fs, f)
	}
	slices.SortFunc(fs, func(a, b devinfo.Field) int { return strings.Compare(a.Key, b.Key) })
	return fs
}

// CompareJSON is Compare for one device object of `grdma -j dev info`.
// JSON numbers are float64: exact up to 2^53, beyond which (max_mr_size
// of rxe is 2^64-1) both sides are compared after the same rounding.
func CompareJSON(ibv Device, obj map[string]any) []string {
	name, _ := obj["hca_id"].(string)
	if ibv.Name != name {
		return []string{fmt.Sprintf("device %s, ibv_devinfo %s", name, ibv.Name)}
	}
	diffs := compareFields(name, rounded(ibv.Section), FieldsFromJSON(obj))
	ports, _ := obj["ports"].([]any)
	if len(ibv.Ports) != len(ports) {
		return append(diffs, fmt.Sprintf("%s: %d ports, ibv_devinfo %d", name, len(ports), len(ibv.Ports)))
	}
	for i, ip := range ibv.Ports {
		po, _ := ports[i].(map[string]any)
		where := fmt.Sprintf("%s/%v", name, po["port"])
		if n, _ := po["port"].(float64); int(n) != ip.Num {
			diffs = append(diffs, fmt.Sprintf("%s: ibv_devinfo port %d", where, ip.Num))
			continue
		}
		diffs = append(diffs, compareFields(where, rounded(ip.Section), FieldsFromJSON(po))...)
		var gids []string
		list, _ := po["gids"].([]any)
		for _, g := range list {
			gm, _ := g.(map[string]any)
			gids = append(gids, fmt.Sprintf("%v %v, %v", gm["index"], gm["gid"], gm["type"]))
		}
		if !slices.Equal(gids, ip.GIDs) {
			diffs = append(diffs, fmt.Sprintf("%s: GIDs %q, ibv_devinfo %q", where, gids, ip.GIDs))
		}
	}
	return diffs
}

// rounded rounds ibv_devinfo's numbers as a JSON decoder rounds grdma's.
func rounded(s Section) Section {
	out := Section{Values: map[string]string{}, Names: s.Names}
	for k, v := range s.Values {
		if n, err := parseNumber(v); err == nil && n > 1<<53 {
			v = strconv.FormatUint(uint64(float64(n)), 10)
		}
		out.Values[k] = v
	}
	return out
}
