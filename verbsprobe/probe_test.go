package verbsprobe

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// The probe needs an RDMA device to get past open; the e2e guest runs it
// for real (e2e/guest/probe_test.go). Here: the steps before the device,
// address selection and diagnoses on the captured and modelled sysfs
// trees, and the timing summary.

func fixture(t *testing.T, name string) sysfs.FS {
	t.Helper()
	f, err := sysfs.NewFS("../sysfs/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func stepNames(r *Result) string {
	var names []string
	for _, s := range r.Steps {
		names = append(names, s.Name)
	}
	return strings.Join(names, ",")
}

func TestRunMissingDevice(t *testing.T) {
	r := Run(context.Background(), Options{Sysfs: fixture(t, "rxe-6.12"), Device: "rxe9", GIDIndex: AutoGID})
	if r.OK() || stepNames(r) != "open" || r.Port != 1 {
		t.Fatalf("steps %s, ok %v, port %d; want a failed open on port 1 and nothing to tear down", stepNames(r), r.OK(), r.Port)
	}
	e := r.Steps[0].Err
	var nf *ib.NotFoundError
	if !errors.As(e, &nf) || e.Error() != "open: RDMA device rxe9 not found" || e.Cause != "the RDMA devices are: rxe0, rxe1" {
		t.Errorf("error %q, cause %q", e, e.Cause)
	}
	if r.Err() != e {
		t.Errorf("Err() = %v, want the step's error", r.Err())
	}

	empty, err := sysfs.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r = Run(context.Background(), Options{Sysfs: empty, Device: "rxe0", GIDIndex: AutoGID})
	if c := r.Steps[0].Err.Cause; !strings.HasPrefix(c, "there are no RDMA devices") {
		t.Errorf("cause without devices: %q", c)
	}
}

// The captured tree has no dev/: the character device sysfs names is
// missing.
func TestRunMissingCharDevice(t *testing.T) {
	r := Run(context.Background(), Options{Sysfs: fixture(t, "rxe-6.12"), Device: "rxe0", GIDIndex: AutoGID})
	if stepNames(r) != "open" || r.Driver != "rxe" || r.VerbsDevice != "uverbs0" {
		t.Fatalf("steps %s, driver %q, verbs device %q", stepNames(r), r.Driver, r.VerbsDevice)
	}
	e := r.Steps[0].Err
	if e.Errno() != unix.ENOENT || e.ErrnoName() != "ENOENT" || !strings.Contains(e.Error(), "/dev/infiniband/uverbs0") ||
		!strings.Contains(e.Cause, "/dev/infiniband/uverbs0 does not exist") {
		t.Errorf("error %q (%s), cause %q", e, e.ErrnoName(), e.Cause)
	}
}

func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := Run(ctx, Options{Sysfs: fixture(t, "rxe-6.12"), Device: "rxe0", GIDIndex: AutoGID})
	if stepNames(r) != "open" || !errors.Is(r.Err(), context.Canceled) || r.Steps[0].Err.Error() != "open: interrupted: context canceled" {
		t.Errorf("steps %s, err %v", stepNames(r), r.Err())
	}
}

// newTestTarget is a device port past QUERY_PORT on a sysfs tree.
func newTestTarget(fsys sysfs.FS, dev string, gidIndex int, port uverbs.PortAttr) *target {
	return &target{opts: Options{Sysfs: fsys, Device: dev, Port: 1, GIDIndex: gidIndex}, port: port, addr: Address{GIDIndex: AutoGID}}
}

var (
	rocePort = uverbs.PortAttr{State: ib.PortActive, LinkLayer: ib.LinkLayerEthernet}
	ibPort   = uverbs.PortAttr{State: ib.PortActive, LinkLayer: ib.LinkLayerInfiniBand, LID: 5, GIDTblLen: 8}
)

func TestChooseAddress(t *testing.T) {
	rxe, hca := fixture(t, "rxe-6.12"), fixture(t, "hca")
	rxePort, mlx5Port := rocePort, rocePort
	rxePort.GIDTblLen, mlx5Port.GIDTblLen = 1024, 16
	for _, tt := range []struct {
		fsys     sysfs.FS
		dev      string
		gidIndex int
		port     uverbs.PortAttr
		index    int
		lid      uint16
		detail   string
	}{
		// RoCE v2 IPv4 first: rxe0 has link-local at 0, 10.9.0.1 at 1.
		{rxe, "rxe0", AutoGID, rxePort, 1, 0, "GID 1 ::ffff:10.9.0.1 RoCE v2 veth0"},
		{rxe, "rxe0", 2, rxePort, 2, 0, "GID 2 fd00:9::1 RoCE v2 veth0"},
		{rxe, "rxe0", 0, rxePort, 0, 0, "GID 0 fe80::4c9c:e2ff:fed0:bcea RoCE v2 veth0"},
		// mlx5 has a RoCE v1 and a v2 GID per address: v2 IPv4 is 3.
		{hca, "mlx5_0", AutoGID, mlx5Port, 3, 0, "GID 3 ::ffff:192.168.10.1 RoCE v2 ens1f0np0"},
		// Only link-local: that one, v2.
		{hca, "mlx5_1", AutoGID, mlx5Port, 1, 0, "GID 1 fe80::e42:a1ff:fe12:3457 RoCE v2 ens1f1np1"},
		// InfiniBand: the LID, no GRH, unless a GID is asked for.
		{hca, "mlx5_2", AutoGID, ibPort, AutoGID, 5, "LID 0x5, no GRH"},
		{hca, "mlx5_2", 0, ibPort, 0, 5, "GID 0 fe80::c42:a103:ab:cdef IB, LID 0x5"},
	} {
		p := newTestTarget(tt.fsys, tt.dev, tt.gidIndex, tt.port)
		detail, err := p.chooseAddress(context.Background())
		if err != nil || detail != tt.detail || p.addr.GIDIndex != tt.index || p.addr.LID != tt.lid {
			t.Errorf("%s gid-index %d: %q, %v; index %d, LID %d; want %q, index %d, LID %d",
				tt.dev, tt.gidIndex, detail, err, p.addr.GIDIndex, p.addr.LID, tt.detail, tt.index, tt.lid)
		}
	}
}

// selectGID reads the table only until its answer is certain; it must
// choose what the gid selector chooses over the whole table.
func TestSelectGIDAgreesWithSelector(t *testing.T) {
	for _, tree := range []string{"rxe-6.1", "rxe-6.12", "hca"} {
		fsys := fixture(t, tree)
		tables, err := gid.ReadTables(fsys, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, table := range tables {
			attrs, _ := fsys.GIDAttrs(table.Device, table.Port)
			ll, _ := fsys.LinkLayer(table.Device, table.Port)
			port := rocePort
			if ll == ib.LinkLayerInfiniBand {
				port.LinkLayer = ib.LinkLayerInfiniBand
			}
			port.GIDTblLen = uint32(len(attrs))
			p := newTestTarget(fsys, table.Device, AutoGID, port)
			got, err := p.selectGID()
			want, wantErr := selectOverTable(table.Entries)
			if (err != nil) != (wantErr != nil) || got != want {
				t.Errorf("%s %s/%d: selectGID = %v, %v; the selector over the table: %v, %v",
					tree, table.Device, table.Port, got, err, want, wantErr)
			}
		}
	}
}

func selectOverTable(entries []gid.Entry) (gid.Entry, error) {
	for _, c := range addressPreference {
		if e, err := gid.Select(entries, c); err == nil {
			return e, nil
		}
	}
	return gid.Entry{}, errors.New("none")
}

func TestChooseAddressErrors(t *testing.T) {
	rxe := fixture(t, "rxe-6.12")
	port := rocePort
	port.GIDTblLen = 1024
	p := newTestTarget(rxe, "rxe0", 3, port)
	_, err := p.chooseAddress(context.Background())
	var bad *GIDIndexError
	if !errors.As(err, &bad) || err.Error() != "GID index 3 of rxe0/1 is empty; the table has: "+
		"0 fe80::4c9c:e2ff:fed0:bcea RoCE v2 veth0, 1 ::ffff:10.9.0.1 RoCE v2 veth0, 2 fd00:9::1 RoCE v2 veth0" {
		t.Errorf("empty index: %v", err)
	}
	if c := p.likelyCause(StepAddress, err); !strings.Contains(c, "gid-index") {
		t.Errorf("cause %q", c)
	}
	p = newTestTarget(rxe, "rxe0", 1024, port)
	if _, err := p.chooseAddress(context.Background()); err == nil || err.Error() != "GID index 1024 is out of range: rxe0/1 has 1024 GID slots (0-1023)" {
		t.Errorf("index past the table: %v", err)
	}
	// A port whose table is empty (QUERY_PORT's gid_tbl_len 0).
	p = newTestTarget(rxe, "rxe0", AutoGID, rocePort)
	_, err = p.chooseAddress(context.Background())
	var none *NoGIDError
	if !errors.As(err, &none) || err.Error() != "no usable GID on rxe0/1: the GID table is empty" ||
		p.likelyCause(StepAddress, err) != "RoCE GIDs come from the addresses of network device veth0: give it an IP address (ip addr add ... dev veth0)" {
		t.Errorf("no GID: %v; cause %q", err, p.likelyCause(StepAddress, err))
	}
	ib := ibPort
	ib.LID = 0
	p = newTestTarget(fixture(t, "hca"), "mlx5_2", AutoGID, ib)
	if _, err := p.chooseAddress(context.Background()); err == nil || !strings.Contains(p.likelyCause(StepAddress, err), "subnet manager") {
		t.Errorf("IB without a LID: %v", err)
	}
}

func TestLikelyCauses(t *testing.T) {
	p := newTestTarget(fixture(t, "rxe-6.12"), "rxe0", AutoGID, rocePort)
	p.verbsDevice = "uverbs0"
	cmdErr := func(command string, errno unix.Errno) error {
		return &uverbs.CommandError{Device: "uverbs0 (rxe0)", Command: command, Err: errno}
	}
	for _, tt := range []struct {
		step string
		err  error
		want string // a part of the cause
	}{
		{StepOpen, &fs.PathError{Op: "open", Path: "/dev/infiniband/uverbs0", Err: unix.EACCES}, "no permission to open /dev/infiniband/uverbs0"},
		{StepOpen, sysfs.ErrNoVerbsDevice, "ib_uverbs is not loaded"},
		{StepQueryPort, &PortNotActiveError{Device: "rxe0", Port: 1, State: 1}, "network device veth0 is down or has no carrier (operstate up): ip link set veth0 up"},
		{StepRegMR, cmdErr("REG_MR", unix.ENOMEM), "RLIMIT_MEMLOCK ("},
		{StepRegMR, cmdErr("REG_MR", unix.ENOMEM), "too small to pin the memory region"},
		{StepCreateQP, cmdErr("CREATE_QP", unix.ENOSPC), "a grdma bug"},
		{StepRTR, cmdErr("MODIFY_QP", unix.EINVAL), "could not use GID index"},
		{StepInit, cmdErr("MODIFY_QP", unix.EOPNOTSUPP), "does not enable this uverbs command"},
		{StepSend, &WCError{WC: uverbs.WC{Status: uverbs.WCRetryExcErr}}, "through network device veth0 were lost"},
		{StepSend, &CompletionTimeoutError{Want: 2, Got: 1, Timeout: time.Second}, "stalled"},
		{StepRDMARead, &PayloadMismatchError{Operation: "RDMA READ"}, "wrong data"},
	} {
		if got := p.likelyCause(tt.step, tt.err); !strings.Contains(got, tt.want) {
			t.Errorf("%s %v: cause %q, want it to say %q", tt.step, tt.err, got, tt.want)
		}
	}
	ib := newTestTarget(fixture(t, "hca"), "mlx5_2", AutoGID, ibPort)
	if c := ib.likelyCause(StepQueryPort, &PortNotActiveError{State: 2}); !strings.Contains(c, "subnet manager") {
		t.Errorf("IB port in INIT: %q", c)
	}
	if got := p.likelyCause(StepAllocPD, errors.New("other")); got != "" {
		t.Errorf("unknown error: cause %q, want none", got)
	}
}

func TestResult(t *testing.T) {
	ok := Step{Name: StepOpen, OK: true, Duration: time.Millisecond}
	r := &Result{Device: "irdma0", Steps: []Step{ok, {Name: StepClose, OK: true, Duration: time.Millisecond}}}
	if !r.OK() || r.Err() != nil || r.Duration() != 2*time.Millisecond {
		t.Errorf("passing result: OK %v, Err %v, %v", r.OK(), r.Err(), r.Duration())
	}
	r.Unsupported = "driver irdma not supported by the probe"
	var ue *UnsupportedError
	if r.OK() || !errors.As(r.Err(), &ue) || r.Err().Error() != "irdma0: driver irdma not supported by the probe" {
		t.Errorf("unsupported: OK %v, Err %v", r.OK(), r.Err())
	}
}

func TestSummarize(t *testing.T) {
	run := func(open, pd time.Duration) *Result {
		return &Result{Steps: []Step{{Name: StepOpen, Duration: open}, {Name: StepAllocPD, Duration: pd}}}
	}
	ms := time.Millisecond
	steps, total := Summarize([]*Result{run(3*ms, ms), run(ms, 2*ms), run(2*ms, 4*ms), {Steps: []Step{{Name: StepOpen, Duration: 9 * ms}}}})
	want := []Timing{{StepOpen, 4, ms, 2 * ms, 9 * ms}, {StepAllocPD, 3, ms, 2 * ms, 4 * ms}}
	if len(steps) != 2 || steps[0] != want[0] || steps[1] != want[1] {
		t.Errorf("steps %+v, want %+v", steps, want)
	}
	if total != (Timing{TotalName, 4, 3 * ms, 4 * ms, 9 * ms}) {
		t.Errorf("total %+v", total)
	}
	if _, total := Summarize(nil); total.Runs != 0 {
		t.Errorf("no runs: %+v", total)
	}
}

func TestVerify(t *testing.T) {
	if err := verify("SEND", []byte{1, 2, 3}, []byte{1, 2, 3}); err != nil {
		t.Error(err)
	}
	err := verify("SEND", []byte{1, 9, 3}, []byte{1, 2, 3})
	if err == nil || err.Error() != "SEND payload differs from what was sent at byte 1: 0x09, want 0x02" {
		t.Errorf("verify = %v", err)
	}
	wcs := []uverbs.WC{{WRID: 1, Opcode: uverbs.WCRecv, ByteLen: 10}}
	if expect(wcs, 1, uverbs.WCRecv, 10) != nil || expect(wcs, 1, uverbs.WCRecv, 11) == nil ||
		expect(wcs, 1, uverbs.WCSend, -1) == nil || expect(wcs, 2, uverbs.WCRecv, -1) == nil {
		t.Error("expect does not tell completions apart")
	}
	a, b := make([]byte, 100), make([]byte, 100)
	randomPayload(a)
	randomPayload(b)
	if string(a) == string(b) {
		t.Error("two payloads are equal")
	}
}
