package exporter

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"
)

// TestConcurrentScrapesShareOneReading: 20 scrapes at once read the
// devices once (each reading used to be a netlink socket and every
// device's and port's requests, on mlx5 firmware commands); a scrape
// within ReuseFor of a reading exports it, one after reads again. The
// read errors of a shared reading are counted once.
func TestConcurrentScrapesShareOneReading(t *testing.T) {
	now := time.Unix(1700000000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var reads atomic.Int32
	k := nlfixture.NewKernel("../testdata/nldev/6.12/stat/nl").Standard()
	fsys, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	col := New(Options{Sysfs: fsys, Now: clock, Dial: func() (*nldev.Client, error) {
		reads.Add(1)
		<-release // every scrape is waiting by now
		return nldev.NewClient(k.Conn()), nil
	}})
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	var wg sync.WaitGroup
	var started sync.WaitGroup
	for range 20 {
		started.Add(1)
		wg.Go(func() {
			started.Done()
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
			}
		})
	}
	started.Wait()
	time.Sleep(50 * time.Millisecond) // let them reach the reading
	close(release)
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Errorf("20 concurrent scrapes read the devices %d times, want 1", n)
	}
	mu.Lock()
	now = now.Add(DefaultReuseFor - time.Millisecond)
	mu.Unlock()
	reg.Gather()
	if n := reads.Load(); n != 1 {
		t.Errorf("a scrape %v after the reading read again (%d reads)", DefaultReuseFor-time.Millisecond, n)
	}
	mu.Lock()
	now = now.Add(time.Millisecond)
	mu.Unlock()
	reg.Gather()
	if n := reads.Load(); n != 2 {
		t.Errorf("a scrape %v after the reading reused it (%d reads)", DefaultReuseFor, n)
	}
}

// TestReadErrorsCountedOncePerReading: scrapes that share a reading that
// failed count its error once.
func TestReadErrorsCountedOncePerReading(t *testing.T) {
	fsys, _ := sysfs.NewFS(t.TempDir())
	now := time.Unix(1700000000, 0)
	col := New(Options{Sysfs: fsys, Now: func() time.Time { return now },
		Dial: func() (*nldev.Client, error) { return nil, fmt.Errorf("no netlink here") }})
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	for range 3 {
		reg.Gather()
	}
	want := "\n# HELP grdma_exporter_read_errors_total " + famScrapeErrors.Help + "\n# TYPE grdma_exporter_read_errors_total counter\n"
	for _, what := range readErrorKinds {
		n := 0
		if what == "devices" {
			n = 1
		}
		want += fmt.Sprintf("grdma_exporter_read_errors_total{what=%q} %d\n", what, n)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "grdma_exporter_read_errors_total"); err != nil {
		t.Error(err)
	}
}

// TestPMAReadsOnlyExported: a scrape opens the PMA data counters it
// exports (the 64-bit one, the 32-bit one where there is no 64-bit one)
// and no other file of counters/, which it used to read whole: every
// read of a PMA counter is a MAD to the firmware. inotify sees what is
// opened. The tree is the rxe capture with a counters/ directory added
// (rxe has none; no PMA device runs in the guests), laid out as the
// kernel's pma_group_ext names it.
func TestPMAReadsOnlyExported(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	if out, err := exec.Command("cp", "-a", "../sysfs/testdata/rxe-6.12", root).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	counters := filepath.Join(root, "sys/devices/virtual/infiniband/rxe0/ports/1/counters")
	os.Mkdir(counters, 0o755)
	values := map[string]string{"port_rcv_data_64": "1000", "port_rcv_data": "4294967295", "port_xmit_data": "250"}
	for _, name := range []string{"excessive_buffer_overrun_errors", "link_downed", "link_error_recovery", "local_link_integrity_errors",
		"multicast_rcv_packets", "multicast_xmit_packets", "port_rcv_constraint_errors", "port_rcv_errors", "port_rcv_packets",
		"port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors", "port_xmit_constraint_errors", "port_xmit_discards",
		"port_xmit_packets", "port_xmit_wait", "symbol_error", "unicast_rcv_packets", "unicast_xmit_packets", "VL15_dropped"} {
		values[name] = "7"
	}
	for name, v := range values {
		os.WriteFile(filepath.Join(counters, name), []byte(v+"\n"), 0o444)
	}
	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(in)
	if _, err := unix.InotifyAddWatch(in, counters, unix.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	k := nlfixture.NewKernel("../testdata/nldev/6.12/stat/nl").Standard()
	fsys, err := sysfs.NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(New(Options{Sysfs: fsys, Dial: func() (*nldev.Client, error) { return nldev.NewClient(k.Conn()), nil }}))
	want := `
# HELP grdma_port_data_received_bytes_total ` + famRcvBytes.Help + `
# TYPE grdma_port_data_received_bytes_total counter
grdma_port_data_received_bytes_total{device="rxe0",port="1"} 4000
# HELP grdma_port_data_transmitted_bytes_total ` + famXmitBytes.Help + `
# TYPE grdma_port_data_transmitted_bytes_total counter
grdma_port_data_transmitted_bytes_total{device="rxe0",port="1"} 1000
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "grdma_port_data_received_bytes_total", "grdma_port_data_transmitted_bytes_total"); err != nil {
		t.Error(err)
	}
	var opened []string
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(in, buf)
		if err != nil || n <= 0 {
			break
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
			if name == "" {
				name = "counters/ (listed)"
			}
			opened = append(opened, name)
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
	slices.Sort(opened)
	if !slices.Equal(opened, []string{"port_rcv_data_64", "port_xmit_data"}) {
		t.Errorf("a scrape opened %q in counters/, want only the 64-bit receive and the 32-bit transmit data counters", opened)
	}
}
