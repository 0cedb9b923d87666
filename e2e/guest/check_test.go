//go:build e2eguest

package guest

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
)

// checkReport is the part of grdma -j check the scenario reads.
type checkReport struct {
	OK     bool `json:"ok"`
	Checks []struct {
		Name, Status, Subject, Message string
		PeerMem                        *verdict `json:"peer_mem"`
		DMABuf                         *verdict `json:"dmabuf"`
	} `json:"checks"`
}

type verdict struct {
	Supported     *bool  `json:"supported"`
	KernelSupport *bool  `json:"kernel_support"`
	Reason        string `json:"reason"`
	Signals       []struct {
		Name, State, Value string
	} `json:"signals"`
}

// kallsymsHas reports whether the running kernel exports symbol.
func kallsymsHas(t *testing.T, symbol string) bool {
	t.Helper()
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 3 && fields[2] == symbol {
			return true
		}
	}
	return false
}

// TestCheck: grdma check passes on healthy rxe ports, fails naming the
// port once its netdev is down, and reports GPUDirect as the kernel is.
func TestCheck(t *testing.T) {
	cleanRDMA(t)
	vethPairs(t, 4) // veth2/veth3: rxe1's carrier must not follow veth0's
	addRxe(t, "rxe0", "veth0")
	addRxe(t, "rxe1", "veth2")
	eventually(10*time.Second, func() bool { return run(grdma(), "check", "ports", "-q").code == 0 })

	r := run(grdma(), "check", "devices", "ports", "probe", "device-count", "2")
	if r.code != 0 || strings.Contains(r.stdout, "FAIL") || !strings.Contains(r.stdout, "PASS    ports    rxe0/1") ||
		!strings.Contains(r.stdout, "PASS    probe    rxe1/1   RC QP to RTS, SEND/WRITE/READ verified") {
		t.Fatalf("healthy node:\n%s", r)
	}

	var rep checkReport
	r = run(grdma(), "-j", "check", "gdr")
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Checks) != 1 {
		t.Fatalf("gdr JSON (%v):\n%s", err, r)
	}
	g := rep.Checks[0]
	if r.code != 0 || g.Status != "WARN" || !strings.Contains(g.Message, "no NVIDIA driver") || g.DMABuf == nil || g.PeerMem == nil {
		t.Fatalf("gdr on a node without a GPU:\n%s", r)
	}
	hasDMABuf := kallsymsHas(t, "ib_umem_dmabuf_get")
	if g.DMABuf.KernelSupport == nil || *g.DMABuf.KernelSupport != hasDMABuf {
		t.Errorf("dmabuf kernel_support %v, kallsyms has ib_umem_dmabuf_get: %v", g.DMABuf.KernelSupport, hasDMABuf)
	}
	// NCCL's test, REG_DMABUF_MR with fd -1, through grdma's own ioctl:
	// rxe has no dma-buf registration and says so.
	probed := false
	for _, s := range g.DMABuf.Signals {
		if s.Name == "verbs_probe:rxe0" {
			probed = s.State == "no" && s.Value == "EOPNOTSUPP"
		}
	}
	if !probed {
		t.Errorf("no verbs_probe:rxe0 signal answering EOPNOTSUPP: %+v", g.DMABuf.Signals)
	}
	if g.PeerMem.Supported == nil || *g.PeerMem.Supported || kallsymsHas(t, "ib_register_peer_memory_client") {
		t.Errorf("peer_mem should be absent on Debian's kernel: %+v", g.PeerMem)
	}

	ip(t, "link", "set", "veth2", "down")
	t.Cleanup(func() { run(layout.IP, "link", "set", "veth2", "up") })
	eventually(10*time.Second, func() bool { return run(grdma(), "check", "ports", "-q").code != 0 })
	r = run(grdma(), "check", "ports")
	if r.code != 1 || !strings.Contains(r.stdout, "FAIL    ports  rxe1/1   state DOWN, expected ACTIVE") || !strings.Contains(r.stdout, "PASS    ports  rxe0/1") {
		t.Fatalf("after veth2 went down, want exit 1 naming rxe1/1:\n%s", r)
	}
	if q := run(grdma(), "check", "ports", "-q"); q.code != 1 || q.stdout != "" {
		t.Errorf("-q: want exit 1 and no output:\n%s", q)
	}
}
