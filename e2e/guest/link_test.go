//go:build e2eguest

package guest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
)

// TestLinkAddDelete: `grdma link add` makes a device that rdma, ibverbs
// and sysfs all see and that carries RC traffic; `grdma link delete`
// removes it from all three.
func TestLinkAddDelete(t *testing.T) {
	linkLifecycle(t, grdma())
}

// TestRdmaBaseline runs the same lifecycle with iproute2's rdma: if this
// fails the bed is broken, not grdma.
func TestRdmaBaseline(t *testing.T) {
	linkLifecycle(t, layout.Rdma)
}

// rxeAddr gives veth0 an IPv4 address so rxe0 gets a RoCEv2 IPv4 GID (the
// address never leaves the guest).
const rxeAddr = "192.168.77.1"

func linkLifecycle(t *testing.T, tool string) {
	cleanRDMA(t)
	addRxeAddr(t)

	if r := run(tool, "link", "add", "rxe0", "type", "rxe", "netdev", "veth0"); r.code != 0 || r.stderr != "" {
		t.Fatalf("link add: want exit 0 and no stderr:\n%s", r)
	}
	if !inRdmaJSON(t, "rxe0") {
		t.Errorf("rdma -j dev does not list rxe0 after link add")
	}
	if _, err := os.Stat("/sys/class/infiniband/rxe0"); err != nil {
		t.Errorf("sysfs: %v", err)
	}
	var info result
	if !eventually(10*time.Second, func() bool {
		info = run(layout.IbvDevinfo, "-d", "rxe0")
		return info.code == 0 && strings.Contains(info.stdout, "PORT_ACTIVE")
	}) {
		t.Errorf("ibv_devinfo -d rxe0: want exit 0 and PORT_ACTIVE:\n%s", info)
	} else if !strings.Contains(info.stdout, "hca_id:\trxe0") {
		t.Errorf("ibv_devinfo -d rxe0: no hca_id rxe0:\n%s", info)
	}
	gid := ipv4GID(t, "rxe0", rxeAddr)
	pingpong(t, "rxe0", gid)

	if r := run(tool, "link", "delete", "rxe0"); r.code != 0 || r.stderr != "" {
		t.Fatalf("link delete: want exit 0 and no stderr:\n%s", r)
	}
	if inRdmaJSON(t, "rxe0") {
		t.Errorf("rdma -j dev still lists rxe0 after link delete")
	}
	if r := run(layout.IbvDevinfo, "-d", "rxe0"); r.code == 0 {
		t.Errorf("ibv_devinfo -d rxe0 still works after link delete:\n%s", r)
	}
	if _, err := os.Stat("/sys/class/infiniband/rxe0"); !os.IsNotExist(err) {
		t.Errorf("/sys/class/infiniband/rxe0 still there after link delete (%v)", err)
	}
}

// inRdmaJSON reports whether `rdma -j dev` lists a device named name.
func inRdmaJSON(t *testing.T, name string) bool {
	t.Helper()
	r := must(t, layout.Rdma, "-j", "dev")
	var devs []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &devs); err != nil {
		t.Fatalf("rdma -j dev: %v\n%s", err, r)
	}
	for _, d := range devs {
		if d["ifname"] == name {
			return true
		}
	}
	return false
}

// ipv4GID waits for the device's GID table to hold addr (as ::ffff:a.b.c.d)
// and returns its index.
func ipv4GID(t *testing.T, dev, addr string) int {
	t.Helper()
	want := mappedGID(addr)
	dir := filepath.Join("/sys/class/infiniband", dev, "ports/1/gids")
	idx := -1
	var table strings.Builder
	eventually(10*time.Second, func() bool {
		table.Reset()
		for i := 0; ; i++ {
			b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i)))
			if err != nil {
				return false
			}
			g := strings.TrimSpace(string(b))
			table.WriteString(strconv.Itoa(i) + " " + g + "\n")
			if g == want {
				idx = i
				return true
			}
		}
	})
	if idx < 0 {
		t.Fatalf("no GID %s (%s) on %s:\n%s", want, addr, dev, table.String())
	}
	return idx
}

// mappedGID is the GID text sysfs shows for an IPv4 address.
func mappedGID(addr string) string {
	var o [4]int
	for i, p := range strings.Split(addr, ".") {
		o[i], _ = strconv.Atoi(p)
	}
	return "0000:0000:0000:0000:0000:ffff:" + hex4(o[0], o[1]) + ":" + hex4(o[2], o[3])
}

func hex4(a, b int) string { return strconv.FormatInt(int64(0x10000|a<<8|b), 16)[1:] }

// pingpong runs ibv_rc_pingpong server and client (to 127.0.0.1) on one
// rxe device, which loops back to itself; both must exit 0.
func pingpong(t *testing.T, dev string, gid int) { t.Helper(); pingpongN(t, dev, gid, 100) }

// pingpongN runs n ibv_rc_pingpong iterations (safe to call from a goroutine).
func pingpongN(t *testing.T, dev string, gid, n int) {
	t.Helper()
	args := []string{"-d", dev, "-g", strconv.Itoa(gid), "-n", strconv.Itoa(n)}
	server := make(chan result, 1)
	go func() { server <- run(layout.IbvRcPingpong, args...) }()
	// The client gives up at once if nobody listens on TCP 18515 (0x4853).
	if !eventually(20*time.Second, func() bool { return listening(0x4853) }) {
		t.Errorf("ibv_rc_pingpong server never listened")
	}
	client := run(layout.IbvRcPingpong, append(args, "127.0.0.1")...)
	srv := <-server
	if client.code != 0 || srv.code != 0 {
		t.Errorf("ibv_rc_pingpong over %s GID %d failed:\nserver: %s\nclient: %s", dev, gid, srv, client)
	}
}

// listening reports whether a TCP socket (v4 or v6) listens on port.
func listening(port int) bool {
	return listeningIn(readFile("/proc/net/tcp")+readFile("/proc/net/tcp6"), port)
}

// listeningIn reports whether /proc/net/tcp{,6} text shows a socket
// listening on port.
func listeningIn(procNetTCP string, port int) bool {
	for _, line := range strings.Split(procNetTCP, "\n") {
		fields := strings.Fields(line)
		if len(fields) > 3 && strings.HasSuffix(fields[1], fmt.Sprintf(":%04X", port)) && fields[3] == "0A" {
			return true
		}
	}
	return false
}
