package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grdma/grdma/devinfo"
	"github.com/grdma/grdma/internal/devinfofixture"
	"github.com/grdma/grdma/internal/ibvdevinfo"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/uverbs"
)

// runDevInfo runs grdma with the dev info recording of a kernel
// (devinfo/testdata: rxe0 on veth0 at MTU 9000, rxe1 on the down veth2).
func runDevInfo(t *testing.T, kernel string, args ...string) (string, string, int) {
	t.Helper()
	rec := devinfofixture.Dir(filepath.Join("..", "..", "devinfo", "testdata", kernel))
	root := t.TempDir()
	if _, err := rec.Sysfs(root); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	a := newApp(strings.NewReader(""), &out, &errOut)
	k := rec.Kernel()
	a.dial = func() (*nldev.Client, error) { return nldev.NewClient(k.Conn()), nil }
	a.openVerbs = func(dev string, _ uverbs.Node) (devinfo.Verbs, error) { return rec.Verbs(dev), nil }
	code := a.main(append([]string{"--sysfs-root", root}, args...))
	return out.String(), errOut.String(), code
}

// TestDevInfoJSONAgreesWithIbvDevinfo: every value of grdma -j dev info,
// read back from its JSON, is what ibv_devinfo -v printed for the
// recorded state; and the comparison catches a changed value.
func TestDevInfoJSONAgreesWithIbvDevinfo(t *testing.T) {
	for _, kv := range kernels {
		t.Run(kv, func(t *testing.T) {
			out, stderr, code := runDevInfo(t, kv, "-j", "dev", "info")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var objs []map[string]any
			if err := json.Unmarshal([]byte(out), &objs); err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			text, err := devinfofixture.Dir(filepath.Join("..", "..", "devinfo", "testdata", kv)).IbvDevinfo()
			if err != nil {
				t.Fatal(err)
			}
			ibv, err := ibvdevinfo.Parse(text)
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) != 2 || len(ibv) != 2 {
				t.Fatalf("%d devices, ibv_devinfo %d", len(objs), len(ibv))
			}
			for i := range objs {
				for _, diff := range ibvdevinfo.CompareJSON(ibv[i], objs[i]) {
					t.Error(diff)
				}
			}
			objs[0]["max_qp"] = objs[0]["max_qp"].(float64) + 1
			port := objs[0]["ports"].([]any)[0].(map[string]any)
			port["state_value"] = 1.0
			if diffs := ibvdevinfo.CompareJSON(ibv[0], objs[0]); len(diffs) != 2 {
				t.Errorf("changed max_qp and state_value: %d differences, want 2: %q", len(diffs), diffs)
			}
		})
	}
}

// TestDevInfoGolden pins the text and JSON output.
func TestDevInfoGolden(t *testing.T) {
	for _, args := range [][]string{{"dev", "info"}, {"-j", "-p", "dev", "info", "rxe1"}} {
		name := "devinfo-6.12_" + strings.Join(args, "_")
		t.Run(name, func(t *testing.T) {
			out, stderr, code := runDevInfo(t, "6.12", args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			checkGolden(t, name, out)
		})
	}
	_, stderr, code := runDevInfo(t, "6.12", "dev", "info", "mlx5_0")
	if code != 1 || stderr != "grdma: RDMA device mlx5_0 not found (devices: rxe0, rxe1)\n" {
		t.Errorf("unknown device: exit %d, %q", code, stderr)
	}
}
