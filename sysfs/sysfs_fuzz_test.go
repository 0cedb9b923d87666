package sysfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseRate: ParseRate never panics, and a rate it accepts prints, in
// the kernel's format, as text that parses to the same rate.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"100 Gb/sec (4X EDR)", "2.5 Gb/sec (1X SDR)", "10 Gb/sec (4X)", "25 Gb/sec (1X EDR)",
		"400 Gb/sec (4X NDR)", "14 Gb/sec (1X FDR)", "0 Gb/sec (1X)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			return
		}
		if back, err := ParseRate(r.String()); err != nil || back != r {
			t.Errorf("ParseRate(%q) = %+v, which prints as %q, parsed back to %+v, %v", s, r, r.String(), back, err)
		}
	})
}

// FuzzParseGUID: a GUID ParseGUID accepts prints in sysfs form as its
// input, lower-cased.
func FuzzParseGUID(f *testing.F) {
	for _, s := range []string{"0c42:a103:0012:3456", "0000:0000:0000:0000", "ffff:ffff:ffff:ffff", "0c42:a103:0012", "+c42:a103:0012:3456"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		guid, err := ParseGUID(s)
		if err != nil {
			return
		}
		text := fmt.Sprintf("%04x:%04x:%04x:%04x", guid>>48, guid>>32&0xffff, guid>>16&0xffff, guid&0xffff)
		if back, err := ParseGUID(text); err != nil || back != guid {
			t.Errorf("ParseGUID(%q) = %#x, which prints as %q, parsed back to %#x, %v", s, guid, text, back, err)
		}
	})
}

// FuzzPort writes arbitrary contents into every attribute of a port and
// of its netdev and reads them: Port and Netdev return values or errors,
// never panic, and never report what the files do not say.
func FuzzPort(f *testing.F) {
	f.Add("4: ACTIVE\n", "5: LinkUp\n", "100 Gb/sec (4X EDR)\n", "0x5\n", "1500\n")
	f.Add("1: DOWN", "3: Disabled", "2.5 Gb/sec (1X SDR)", "12", "9000")
	f.Add("", "", "", "", "")
	root := f.TempDir()
	port := filepath.Join(root, "sys/class/infiniband/fuzz0/ports/1")
	netdev := filepath.Join(root, "sys/class/net/fuzz0")
	for _, dir := range []string{port, netdev} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	fsys := mustFS(f, root)
	f.Fuzz(func(t *testing.T, state, physState, rate, number, mtu string) {
		files := map[string]string{
			port + "/state": state, port + "/phys_state": physState, port + "/link_layer": "Ethernet\n", port + "/rate": rate,
			port + "/lid": number, port + "/sm_lid": number, port + "/lid_mask_count": number, port + "/sm_sl": number, port + "/cap_mask": number,
			netdev + "/mtu": mtu, netdev + "/ifindex": number, netdev + "/operstate": state, netdev + "/address": physState,
		}
		for name, text := range files {
			if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if p, err := fsys.Port("fuzz0", 1); err == nil {
			if want, _ := ParseRate(string(trimNewline([]byte(rate)))); p.Rate != want {
				t.Errorf("rate %q read as %+v", rate, p.Rate)
			}
		}
		if n, err := fsys.Netdev("fuzz0"); err == nil && n.MTU < 0 {
			t.Errorf("mtu %q read as %d", mtu, n.MTU)
		}
	})
}

// FuzzParseDevNumber: the dev attribute of a uverbs device; what parses
// prints back as the canonical "major:minor".
func FuzzParseDevNumber(f *testing.F) {
	for _, s := range []string{"231:192", "0:0", "4294967295:1", "231:", ":1", "231:192:1", "-1:3", "+1:3", "231 :192"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		major, minor, err := parseDevNumber(s)
		if err != nil {
			return
		}
		m2, n2, err := parseDevNumber(fmt.Sprintf("%d:%d", major, minor))
		if err != nil || m2 != major || n2 != minor {
			t.Fatalf("%q -> %d:%d does not parse back (%d:%d, %v)", s, major, minor, m2, n2, err)
		}
	})
}

// FuzzPMAValue: a PMA counter's text; data counters are in 4-byte words,
// and the byte count must be exactly 4 times the words, never wrapped.
func FuzzPMAValue(f *testing.F) {
	for _, s := range []string{"0", "1234\n", "N/A (no PMA)", "18446744073709551615", "4611686018427387904", " 7 "} {
		f.Add("port_xmit_data", s)
		f.Add("symbol_error", s)
	}
	f.Fuzz(func(t *testing.T, name, text string) {
		v, ok := parsePMAValue(name, text)
		if !ok {
			return
		}
		words, err := strconv.ParseUint(strings.TrimSpace(text), 10, 64)
		if err != nil {
			t.Fatalf("%q accepted as %d but does not parse", text, v)
		}
		if pmaWords[name] && (v%4 != 0 || v/4 != words) {
			t.Fatalf("%s %q: %d bytes for %d words", name, text, v, words)
		}
		if !pmaWords[name] && v != words {
			t.Fatalf("%s %q: %d, want %d", name, text, v, words)
		}
	})
}
