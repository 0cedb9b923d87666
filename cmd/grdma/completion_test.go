package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/nldev"
	"github.com/spf13/cobra"
)

// rxeSysfs is a captured /sys of the guest: netdevs lo, veth0, veth1.
var rxeSysfs = filepath.Join("..", "..", "sysfs", "testdata", "rxe-6.12")

// complete runs the hidden __complete command the shell scripts call and
// returns the candidates (descriptions cut off) and the directive line.
func complete(t *testing.T, dial func() (*nldev.Client, error), line ...string) (cands []string, directive string) {
	t.Helper()
	var out, errOut bytes.Buffer
	a := newApp(strings.NewReader(""), &out, &errOut)
	a.dial = dial
	args := append([]string{"__complete", "--sysfs-root", rxeSysfs}, line...)
	if code := a.main(args); code != 0 {
		t.Fatalf("grdma %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	directive = lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		name, _, _ := strings.Cut(l, "\t")
		cands = append(cands, name)
	}
	return cands, directive
}

func recordedDial(kv string) func() (*nldev.Client, error) {
	return func() (*nldev.Client, error) { return nldev.NewClient(standardKernel(kv).Conn()), nil }
}

func TestCompletion(t *testing.T) {
	dir := t.TempDir()
	for _, ns := range []string{"blue", "red"} {
		os.WriteFile(filepath.Join(dir, ns), nil, 0o644)
	}
	defer func(old string) { netnsDir = old }(netnsDir)
	netnsDir = dir

	cases := []struct {
		line string // the last word is the one being completed ("" after a space)
		want string
	}{
		// The target: netdevs after "netdev", from /sys/class/net.
		{"link add rxe0 type rxe netdev ", "lo veth0 veth1"},
		{"link add rxe0 type rxe netdev ve", "veth0 veth1"},
		{"link add rxe0 type ", "rxe siw"},
		{"link add rxe0 ", "type netdev"},
		{"link add rxe0 t", "type"},
		{"link add ", ""},
		{"link ", "add delete show list"},
		{"l sh ", "rxe0 rxe1"},
		{"link show ", "rxe0 rxe1"},
		{"link show rxe0", "rxe0 rxe0/1"},
		{"link show rxe1/", "rxe1/1"},
		{"link delete ", "rxe0 rxe1"},
		{"dev ", "add delete show list set info"},
		{"dev info ", "rxe0 rxe1"},
		{"dev set ", "rxe0 rxe1"},
		{"dev set rxe0 ", "name netns adaptive-moderation"},
		{"dev set rxe0 netns ", "blue red"},
		{"dev set rxe0 adaptive-moderation ", "on off"},
		{"dev set rxe0 name rxe_a ", ""},
		{"sys set ", "netns privileged-qkey"},
		{"system set netns ", "shared exclusive"},
		{"sys set privileged-qkey ", "on off"},
		{"port show ", "rxe0 rxe1"},
		{"gid show ", "rxe0 rxe1 type ipv4 ipv6 netdev"},
		{"gid show rxe0/1 ", "type ipv4 ipv6 netdev"},
		{"gid show type ", "v1 v2 ib"},
		{"gid show rxe0/1 ipv4 netdev ", "lo veth0 veth1"},
		{"stat ", "show list qp mr mode set unset export"},
		{"stat show ", "link mr"},
		{"stat show link ", "rxe0 rxe1"},
		{"stat set link ", "rxe0/1 rxe1/1"},
		{"stat set link rxe0/1 ", "link optional-counters"},
		{"stat qp ", "show list mode set bind unbind link cntn lqpn pid qp-type optional-counters"},
		{"stat qp show qp-type U", "UC UD"},
		{"stat qp link rxe0/1 lqpn 1 ", "link cntn lqpn pid qp-type optional-counters"},
		{"stat qp set link rxe0/1 auto ", "type pid type,pid off"},
		{"stat qp set link rxe0/1 auto type ", "on off"},
		{"stat qp set link rxe0/1 auto off ", ""},
		{"stat qp set link rxe0/1 auto type on ", "link auto optional-counters"},
		{"monitor ", ""},
		{"completion ", "bash zsh fish"},
		{"-n ", "blue red"},
		{"frobnicate ", ""},
		{"res ", "show set list"},
		{"res show ", "qp cm_id cq mr pd ctx srq frmr_pools rxe0 rxe1"},
		{"res show qp ", "link lqpn rqpn pid sq-psn rq-psn type path-mig-state state pdn dev comm"},
		{"res show qp link rxe1", "rxe1 rxe1/1"},
		{"res show qp state R", "RESET RTR RTS"},
		{"res show cq poll-ctx ", "DIRECT SOFTIRQ WORKQUEUE UNBOUND_WORKQUEUE"},
		{"probe ", "rxe0 rxe1"},
		{"probe rxe0/1 ", "gid-index traffic count listen peer bw lat pingpong size iters duration timeout from serve peers memory peer-memory grace auth ud-pingpong ping interval cm tos rping ucmatose perftest fabtests"},
		{"probe rxe0 peer h ping size ", "cycle"},
		{"sweep ", "run coordinate report"},
		{"sweep run ", "rxe0 rxe1"},
		{"sweep run rxe0 ", "hosts rank port quick bw lat size iters duration timeout start out gid-index confirm"},
		{"sweep run rxe0 bw ", "write send read"},
		{"sweep coordinate ", "hosts quick bw lat size iters duration timeout parallel confirm out scheme http-config exporter-port responder-port bw-module lat-module bw-fraction lat-factor spread bw-floor port-fraction lat-ceiling"},
		{"sweep coordinate confirm ", "on off"},
		{"sweep report ", "bw-fraction lat-factor spread bw-floor port-fraction lat-ceiling"},
		{"check ", "devices ports probe gdr cm state min-rate mtu gid-type gid-index type ipv4 ipv6 netdev-mtu device-count device-names gpu"},
		{"check ports gid-type ", "v1 v2 ib"},
		{"cm ", "show list set"},
		{"cm show ", "rxe0 rxe1"},
		{"cm set rxe0/1 ", "roce-mode tos"},
		{"cm set rxe0/1 roce-mode ", "v1 v2"},
		{"check devices device-names ", "rxe0 rxe1"},
	}
	for _, c := range cases {
		t.Run(c.line, func(t *testing.T) {
			got, directive := complete(t, recordedDial("6.12"), strings.Split(c.line, " ")...)
			if strings.Join(got, " ") != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
			if c.line != "-n " && directive != ":4" { // NoFileComp
				t.Errorf("directive %s, want :4 (no file names)", directive)
			}
		})
	}
}

// TestCompletionWithoutRDMA: with no RDMA netlink, devices are not offered
// and nothing fails; keywords and netdevs still complete.
func TestCompletionWithoutRDMA(t *testing.T) {
	noRDMA := func() (*nldev.Client, error) { return nil, nldev.ErrNoRDMANetlink }
	for line, want := range map[string]string{
		"link show ":                     "",
		"gid show ":                      "type ipv4 ipv6 netdev",
		"stat set link ":                 "",
		"link add rxe0 type rxe netdev ": "lo veth0 veth1",
	} {
		got, directive := complete(t, noRDMA, strings.Split(line, " ")...)
		if strings.Join(got, " ") != want || directive != ":4" {
			t.Errorf("%q: got %q %s, want %q :4", line, got, directive, want)
		}
	}
}

// TestCompletionObjects: object names come from the command tree, so a
// new object completes without touching this file.
func TestCompletionObjects(t *testing.T) {
	got, _ := complete(t, recordedDial("6.12"), "")
	root := newApp(nil, nil, nil).newRoot()
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() && !slices.Contains(got, c.Name()) {
			t.Errorf("object %s not offered: %q", c.Name(), got)
		}
	}
}

// useWord is a literal word of a synopsis (not an option: -i, --pma, --web.config.file).
var useWord = regexp.MustCompile(`(^|[^-a-z.])([a-z][a-z0-9_-]*)`)

// TestCompletionGrammarsMatchCommands keeps the grammars honest: every
// literal word of an object's synopsis (Use) completes, and the filters
// of res are those its help lists. An object without a grammar completes
// nothing after its name: add one to completion's grammars.
func TestCompletionGrammarsMatchCommands(t *testing.T) {
	root := newApp(nil, nil, nil).newRoot()
	byName := map[string]*cobra.Command{}
	for _, c := range root.Commands() {
		byName[c.Name()] = c
		if !slices.Contains(grammar.Objects(), c.Name()) {
			if c.Name() != "completion" && c.Name() != "help" {
				t.Errorf("object %s has no completion grammar", c.Name())
			}
			continue
		}
		words := append(grammar.Object(c.Name()).Literals(), c.Name())
		for _, m := range useWord.FindAllStringSubmatch(c.Use, -1) {
			if !slices.Contains(words, m[2]) {
				t.Errorf("%s: %q of its synopsis does not complete (add it to completion's grammars)", c.Name(), m[2])
			}
		}
	}
	if res := byName["res"]; res != nil {
		// Help and completion come from the one res grammar.
		for _, typ := range nldev.ResTypes {
			var keys []string
			for _, f := range grammar.ResFilters(typ) {
				keys = append(keys, f.Name)
			}
			got, _ := complete(t, recordedDial("6.12"), "res", "show", typ.String(), "")
			if !slices.Equal(got, keys) {
				t.Errorf("res show %s completes %q, want %q", typ, got, keys)
			}
			if !strings.Contains(res.Long, "\n  "+typ.String()+" ") {
				t.Errorf("res help lists no filters of %s", typ)
			}
		}
		got, _ := complete(t, recordedDial("6.12"), "res", "show", "qp", "state", "")
		if !slices.Contains(got, "RTS") {
			t.Errorf("res show qp state: %q", got)
		}
	}
}

func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "# bash completion V2 for grdma",
		"zsh":  "#compdef grdma",
		"fish": "# fish completion for grdma",
	} {
		out, stderr, code := runGrdma(t, standardKernel("6.12"), "completion", shell)
		if code != 0 || !strings.HasPrefix(out, want) || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: exit %d, %q..., stderr %q", shell, code, out[:min(len(out), 60)], stderr)
		}
	}
	for args, wantCode := range map[string]int{"completion": exitUsage, "completion tcsh": exitUsage, "completion bash zsh": exitUsage} {
		_, _, code := runGrdma(t, standardKernel("6.12"), strings.Fields(args)...)
		if code != wantCode {
			t.Errorf("grdma %s: exit %d, want %d", args, code, wantCode)
		}
	}
}

// TestCompletionTopo: topo's words, and after gpu (topo's and check's)
// the display functions of the captured switch layout: the virtio-vga
// behind the switch and the VGA on its own root port, not the NICs,
// bridges or host bridges; after one, the others and the keywords.
func TestCompletionTopo(t *testing.T) {
	tree := filepath.Join("..", "..", "pci", "testdata", "switch-6.12")
	for _, c := range []struct{ line, want string }{
		{"topo ", "show gpu gdr-level platform"},
		{"topo gpu ", "0000:05:00.0 0000:0a:00.0"},
		{"topo gpu 0000:0", "0000:05:00.0 0000:0a:00.0"},
		{"topo gpu 0000:05:00.0 0000:0a", "0000:0a:00.0"},
		// gpu takes as many as follow: the others, or the next keyword
		{"topo gpu 0000:05:00.0 ", "0000:0a:00.0 show gpu gdr-level platform"},
		{"topo gpu 0000:05:00.0 0000:0a:00.0 ", "show gpu gdr-level platform"},
		{"topo gpu 0000:05:00.0 gdr-level ", "LOC PIX PXB PHB SYS"},
		{"topo gdr-level ", "LOC PIX PXB PHB SYS"},
		{"topo gdr-level P", "PIX PXB PHB"},
		{"topo platform ", "bare-metal virtual"},
		{"check gdr gpu ", "0000:05:00.0 0000:0a:00.0"},
	} {
		t.Run(c.line, func(t *testing.T) {
			var out, errOut bytes.Buffer
			a := newApp(strings.NewReader(""), &out, &errOut)
			a.dial = recordedDial("6.12")
			args := append([]string{"__complete", "--sysfs-root", tree}, strings.Split(c.line, " ")...)
			if code := a.main(args); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			var got []string
			for _, l := range lines[:len(lines)-1] {
				name, _, _ := strings.Cut(l, "\t")
				got = append(got, name)
			}
			if strings.Join(got, " ") != c.want || lines[len(lines)-1] != ":4" {
				t.Errorf("got %q %s, want %q :4", got, lines[len(lines)-1], c.want)
			}
		})
	}
}
