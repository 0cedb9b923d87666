package gid

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/grdma/grdma/ib"
)

// FuzzParse: Parse never panics, and what it accepts formats back, in
// both forms, to text that parses to the same GID.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"fe80:0000:0000:0000:0e42:a1ff:fe12:3456", "fe80::e42:a1ff:fe12:3456", "::ffff:10.9.0.1",
		"0000:0000:0000:0000:0000:ffff:0a09:0001", "::", "10.9.0.1", "fe80::1%eth0", "FE80:0000:0000:0000:0000:0000:0000:0001",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := Parse(s)
		if err != nil {
			return
		}
		for _, text := range []string{g.String(), g.SysfsString()} {
			if back, err := Parse(text); err != nil || back != g {
				t.Errorf("Parse(%q) = %v; its form %q parses to %v, %v", s, g, text, back, err)
			}
		}
	})
}

// FuzzParseType: a type a user may write parses to one whose name parses
// back to it, and the sysfs type names parse on every link layer.
func FuzzParseType(f *testing.F) {
	for _, s := range []string{"ib", "v1", "v2", "RoCE v2", "roce_v1", "IB/RoCE v1", "", "v3"} {
		f.Add(s, "Ethernet")
	}
	f.Fuzz(func(t *testing.T, s, linkLayer string) {
		if typ, err := ParseType(s); err == nil {
			if back, err := ParseType(typ.String()); err != nil || back != typ {
				t.Errorf("ParseType(%q) = %v, whose name parses to %v, %v", s, typ, back, err)
			}
		}
		if typ, err := ParseSysfsType(s, ib.ParseLinkLayer(linkLayer)); err == nil && typ.Version() == "" {
			t.Errorf("ParseSysfsType(%q, %q) = %v, which has no show_gids version", s, linkLayer, typ)
		}
	})
}

// FuzzReadTable writes arbitrary contents into one GID slot of a port
// (gids/0, gid_attrs/types/0, gid_attrs/ndevs/0, link_layer) and reads the
// table: whatever the files hold, ReadTable returns entries or an error,
// and an entry it returns is populated.
func FuzzReadTable(f *testing.F) {
	f.Add("fe80:0000:0000:0000:0e42:a1ff:fe12:3456\n", "RoCE v2\n", "eth0\n", "Ethernet\n")
	f.Add("0000:0000:0000:0000:0000:0000:0000:0000\n", "", "", "InfiniBand\n")
	f.Add("fe80:0000:0000:0000:0000:0000:0000:0000\n", "IB/RoCE v1\n", "", "InfiniBand\n")
	f.Add("0000:0000:0000:0000:0000:ffff:0a09:0001", "IB/RoCE v1", "eth0", "Ethernet")
	root := f.TempDir()
	port := filepath.Join(root, "sys/class/infiniband/fuzz0/ports/1")
	for _, dir := range []string{"gids", "gid_attrs/types", "gid_attrs/ndevs"} {
		if err := os.MkdirAll(filepath.Join(port, dir), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	fsys := mustFS(f, root)
	f.Fuzz(func(t *testing.T, gidText, typeText, ndevText, linkLayer string) {
		for name, text := range map[string]string{"gids/0": gidText, "gid_attrs/types/0": typeText,
			"gid_attrs/ndevs/0": ndevText, "link_layer": linkLayer} {
			if err := os.WriteFile(filepath.Join(port, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		entries, err := ReadTable(fsys, "fuzz0", 1)
		if err != nil {
			return
		}
		for _, e := range entries {
			if e.GID.IsEmpty() || e.Type == 0 || e.Port != 1 {
				t.Errorf("ReadTable returned an unpopulated entry %+v", e)
			}
		}
	})
}
