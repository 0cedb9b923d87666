package pingmesh

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseTargets(t *testing.T) {
	yml := `
- targets: [node1, "node2:18600", "10.0.0.3", "[fd00::4]:18515"]
  labels: {rack: r1, tor: tor1, __meta_hidden: x}
- targets: [node5]
  labels: {rack: r2, rail: "0"}
- targets: []
`
	got, err := ParseTargets("mesh.yml", []byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	r1 := map[string]string{"rack": "r1", "tor": "tor1"}
	want := []Target{
		{"node1", r1}, {"node2:18600", r1}, {"10.0.0.3", r1}, {"[fd00::4]:18515", r1},
		{"node5", map[string]string{"rack": "r2", "rail": "0"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("targets (-want +got):\n%s", d)
	}
	var hp []string
	for _, tg := range got {
		hp = append(hp, tg.HostPort())
	}
	if d := cmp.Diff([]string{"node1:18515", "node2:18600", "10.0.0.3:18515", "[fd00::4]:18515", "node5:18515"}, hp); d != "" {
		t.Errorf("HostPort (-want +got):\n%s", d)
	}

	js := `[{"targets": ["node1"], "labels": {"tor": "t1"}}, {"targets": ["fd00::9"]}]`
	got, err = ParseTargets("mesh.json", []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Labels["tor"] != "t1" || got[1].HostPort() != "[fd00::9]:18515" {
		t.Errorf("JSON: %+v", got)
	}
}

// TestParseTargetsRefuses: files Prometheus would refuse, and what the
// collector cannot probe; each error names the problem.
func TestParseTargetsRefuses(t *testing.T) {
	many := "- targets: ["
	for i := range MaxTargets + 1 {
		many += fmt.Sprintf("h%d,", i)
	}
	many += "]\n"
	for _, tc := range []struct{ name, data, want string }{
		{"m.txt", "[]", "is .json, .yml or .yaml"},
		{"m.yml", "- targets: [a]\n  lables: {a: b}\n", "lables"},
		{"m.json", `[{"targets": ["a"], "extra": 1}]`, "extra"},
		{"m.yml", "targets: [a]\n", "unmarshal"},
		{"m.yml", "- targets: [a]\n  labels: {1rack: x}\n", `"1rack" is not a label name`},
		{"m.yml", "- targets: [a]\n  labels: {rack: \xff}\n", "UTF-8"},
		{"m.yml", "- targets: [a]\n  labels: {rack: " + strings.Repeat("x", 1025) + "}\n", "longer than 1024"},
		{"m.yml", "- targets: [http://a/metrics]\n", "not an address"},
		{"m.yml", "- targets: ['a:']\n", "is not 1-65535"},
		{"m.yml", "- targets: ['a:99999']\n", "is not 1-65535"},
		{"m.yml", "- targets: ['']\n", "empty"},
		{"m.yml", "- targets: [':18515']\n", "no host"},
		{"m.yml", "- targets: [a, b]\n- targets: ['a:18515']\n", "also in group 1"},
		{"m.yml", many, "more than 10000 targets"},
		{"m.yml", strings.Repeat(" ", MaxTargetsBytes+1), "more than"},
	} {
		_, err := ParseTargets(tc.name, []byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			d := tc.data
			if len(d) > 60 {
				d = d[:60] + "..."
			}
			t.Errorf("%s %q: %v, want an error with %q", tc.name, d, err, tc.want)
		}
	}
}

// TestTargetsFileReload: a change is read, a malformed file keeps the
// last good targets and is counted once however often it is polled, a
// fixed file is read again, and a ConfigMap-style update (a symbolic
// link swapped to another file) is seen.
func TestTargetsFileReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mesh.yml")
	write := func(s string) {
		t.Helper()
		// A new file renamed over the old one: another inode, so the
		// change is seen within one mtime tick.
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	f := &TargetsFile{Path: path}
	if _, err := f.Reload(); err == nil {
		t.Fatal("a missing file loaded")
	}
	f.Reload()
	if st := f.Status(); st.Errors != 1 || st.LastOK {
		t.Fatalf("missing file polled twice: %+v, want one error", st)
	}
	write("- targets: [a, b]\n")
	if changed, err := f.Reload(); err != nil || !changed {
		t.Fatalf("first file: changed %v, %v", changed, err)
	}
	if changed, err := f.Reload(); err != nil || changed {
		t.Fatalf("unchanged file: changed %v, %v", changed, err)
	}
	write("- targets: [a, b\n")
	for range 3 {
		if changed, err := f.Reload(); err == nil || changed {
			t.Fatalf("malformed file: changed %v, %v", changed, err)
		}
	}
	if st := f.Status(); st.Errors != 2 || st.LastOK || st.Err == nil {
		t.Errorf("malformed file polled thrice: %+v, want 2 errors in all", st)
	}
	if got := f.Targets(); len(got) != 2 {
		t.Errorf("after a malformed file: %v, want the last good a, b", got)
	}
	write("- targets: [a, b, c]\n  labels: {tor: t1}\n")
	if changed, err := f.Reload(); err != nil || !changed {
		t.Fatalf("fixed file: changed %v, %v", changed, err)
	}
	if st := f.Status(); !st.LastOK || st.Err != nil || time.Since(st.LoadedAt) > time.Minute {
		t.Errorf("fixed file: %+v", st)
	}

	// Kubernetes mounts a ConfigMap key as a symbolic link through
	// ..data, which an update points at another directory.
	cm := t.TempDir()
	for i, body := range []string{"- targets: [x]\n", "- targets: [x, y]\n"} {
		d := filepath.Join(cm, fmt.Sprintf("..v%d", i))
		os.Mkdir(d, 0o755)
		os.WriteFile(filepath.Join(d, "mesh.yml"), []byte(body), 0o644)
	}
	os.Symlink("..v0", filepath.Join(cm, "..data"))
	os.Symlink("..data/mesh.yml", filepath.Join(cm, "mesh.yml"))
	g := &TargetsFile{Path: filepath.Join(cm, "mesh.yml")}
	if _, err := g.Reload(); err != nil || len(g.Targets()) != 1 {
		t.Fatalf("ConfigMap: %v %v", g.Targets(), err)
	}
	os.Symlink("..v1", filepath.Join(cm, "..data.tmp"))
	os.Rename(filepath.Join(cm, "..data.tmp"), filepath.Join(cm, "..data"))
	if changed, err := g.Reload(); err != nil || !changed || len(g.Targets()) != 2 {
		t.Fatalf("ConfigMap updated: changed %v, %v, %v", changed, g.Targets(), err)
	}
}

func TestLocalTarget(t *testing.T) {
	addrs := []netip.Addr{netip.MustParseAddr("10.30.0.1"), netip.MustParseAddr("fd00::1")}
	for addr, want := range map[string]bool{
		"10.30.0.1": true, "10.30.0.1:18600": true, "[fd00::1]:18515": true, "fd00::1": true, "Node1": true,
		"10.30.0.2": false, "localhost": false, "node2": false,
	} {
		if got := LocalTarget(Target{Address: addr}, "node1", addrs); got != want {
			t.Errorf("LocalTarget(%s) = %v, want %v", addr, got, want)
		}
	}
}
