package grammar_test

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v2"

	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/verbsprobe"
)

// The responder's deploy files (issue 25): the systemd unit and the
// DaemonSet's second container start `grdma probe DEV serve` with words
// the parser must take, and give it the memory its limits let peers pin.

// TestResponderUnit: the unit's ExecStart with its default device and
// the arguments its header suggests parses as a responder; LimitMEMLOCK
// holds the memory the peers may pin (the default's and the example's).
func TestResponderUnit(t *testing.T) {
	b, err := os.ReadFile("../deploy/systemd/grdma-responder.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	line := func(re string) string {
		t.Helper()
		m := regexp.MustCompile(`(?m)` + re).FindStringSubmatch(unit)
		if m == nil {
			t.Fatalf("no %s in the unit", re)
		}
		return m[1]
	}
	dev := line(`^Environment=GRDMA_RESPONDER_DEV=(\S+)$`)
	example := line(`^#\s+GRDMA_RESPONDER_ARGS="([^"]*)"`)
	exec := line(`^ExecStart=(.*)$`)
	memlock := parseSize(t, line(`^LimitMEMLOCK=(\S+)$`))
	words := strings.Fields(exec)
	if len(words) < 4 || words[0] != "/usr/local/bin/grdma" || words[1] != "-j" || words[2] != "probe" {
		t.Fatalf("ExecStart: %q", exec)
	}
	for _, args := range []string{"", example, example + " auth /run/credentials/grdma-responder.service/probe.key"} {
		var w []string
		for _, word := range words[3:] {
			switch word {
			case "${GRDMA_RESPONDER_DEV}":
				w = append(w, dev)
			case "$GRDMA_RESPONDER_ARGS":
				w = append(w, strings.Fields(args)...)
			default:
				w = append(w, word)
			}
		}
		req, err := grammar.ParseProbe(w)
		if err != nil || !req.Serve {
			t.Fatalf("ExecStart with GRDMA_RESPONDER_ARGS=%q: serve %v, %v", args, req.Serve, err)
		}
		pinned := req.Responder.MaxPinnedTotal
		if pinned == 0 {
			pinned = verbsprobe.DefaultMaxPinnedTotal
		}
		if memlock < uint64(pinned) {
			t.Errorf("LimitMEMLOCK %d below the %d bytes the responder lets peers pin (%q)", memlock, pinned, args)
		}
	}
}

// TestResponderDaemonSet: the DaemonSet's grdma-responder container runs
// a responder with an allow-list and a secret mounted where its command
// reads it, its port is the responder's, it may pin memory (IPC_LOCK)
// and its memory limit holds what the peers may pin.
func TestResponderDaemonSet(t *testing.T) {
	b, err := os.ReadFile("../deploy/kubernetes/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds map[any]any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d map[any]any
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("YAML: %v", err)
		}
		if d["kind"] == "DaemonSet" {
			ds = d
		}
	}
	get := func(v any, path ...any) any {
		t.Helper()
		for _, k := range path {
			switch x := v.(type) {
			case map[any]any:
				v = x[k]
			case []any:
				v = x[k.(int)]
			default:
				t.Fatalf("%v: no %v", path, k)
			}
		}
		return v
	}
	var c map[any]any
	for _, x := range get(ds, "spec", "template", "spec", "containers").([]any) {
		if get(x, "name") == "grdma-responder" {
			c = x.(map[any]any)
		}
	}
	if c == nil {
		t.Fatal("no grdma-responder container")
	}
	env := map[string]string{}
	for _, e := range get(c, "env").([]any) {
		v, _ := get(e, "value").(string)
		if v == "" {
			v = "10.0.0.7" // status.hostIP
		}
		env[get(e, "name").(string)] = v
	}
	var words []string
	for _, w := range get(c, "command").([]any) {
		s := w.(string)
		if m := regexp.MustCompile(`^\$\((\w+)\)$`).FindStringSubmatch(s); m != nil {
			s = env[m[1]]
		}
		words = append(words, s)
	}
	if len(words) < 4 || words[1] != "-j" || words[2] != "probe" {
		t.Fatalf("command %q", words)
	}
	req, err := grammar.ParseProbe(words[3:])
	if err != nil || !req.Serve {
		t.Fatalf("command %q: serve %v, %v", words, req.Serve, err)
	}
	if len(req.From) != 1 || !netip.MustParsePrefix(req.From[0]).IsValid() || req.Auth == "" {
		t.Errorf("the responder allows %q with secret %q: want the fleet's network and a secret", req.From, req.Auth)
	}
	mounted := false
	for _, m := range get(c, "volumeMounts").([]any) {
		if p, _ := get(m, "mountPath").(string); p != "" && strings.HasPrefix(req.Auth, strings.TrimSuffix(p, "/")+"/") {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("no volume mounted where auth %s is read", req.Auth)
	}
	if port := get(c, "ports", 0, "containerPort"); port != verbsprobe.DefaultPeerPort {
		t.Errorf("container port %v, the responder listens on %d", port, verbsprobe.DefaultPeerPort)
	}
	caps := get(c, "securityContext", "capabilities", "add").([]any)
	if len(caps) != 1 || caps[0] != "IPC_LOCK" {
		t.Errorf("capabilities %v: want IPC_LOCK alone", caps)
	}
	if limit := parseSize(t, get(c, "resources", "limits", "memory").(string)); limit < uint64(req.Responder.MaxPinnedTotal) {
		t.Errorf("memory limit %d below the %d bytes peers may pin", limit, req.Responder.MaxPinnedTotal)
	}
}

// parseSize reads 288M (systemd) or 320Mi (Kubernetes) as bytes.
func parseSize(t *testing.T, s string) uint64 {
	t.Helper()
	m := regexp.MustCompile(`^(\d+)(K|M|G|Ki|Mi|Gi)?$`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("size %q", s)
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	shift := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "Ki": 10, "Mi": 20, "Gi": 30}[m[2]]
	return n << shift
}
