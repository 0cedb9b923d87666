package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/internal/rdmacompat"
	"github.com/grdma/grdma/nldev"
	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"
)

// resRecorded is where the resource recordings of a kernel are: replies
// of the kernel with live QPs, and what rdma printed at the same moment
// (testdata/nldev/res/README.md).
func resRecorded(kernel string) string {
	return filepath.Join("..", "..", "testdata", "nldev", "res", kernel)
}

func resKernel(kv string) *nlfixture.Kernel {
	return nlfixture.NewKernel(filepath.Join(resRecorded(kv), "nl")).Standard().Res()
}

// runRes runs grdma against the resource recordings, with /proc/PID/comm
// of the recorded processes below --sysfs-root.
func runRes(t *testing.T, k *nlfixture.Kernel, kv string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runGrdma(t, k, append([]string{"--sysfs-root", filepath.Join(resRecorded(kv), "root")}, args...)...)
}

// rdmaCommand is one recorded rdma invocation (rdma/commands.txt).
type rdmaCommand struct {
	file string // rdma/FILE.txt holds its standard output
	code int
	args []string
}

func rdmaCommands(t *testing.T, kv string) []rdmaCommand {
	t.Helper()
	return rdmaCommandsIn(t, filepath.Join(resRecorded(kv), "rdma"))
}

// rdmaCommandsIn reads DIR/commands.txt.
func rdmaCommandsIn(t *testing.T, dir string) []rdmaCommand {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "commands.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds []rdmaCommand
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		code, err := strconv.Atoi(fields[1])
		if err != nil {
			t.Fatalf("commands.txt: %q: %v", sc.Text(), err)
		}
		cmds = append(cmds, rdmaCommand{fields[0], code, fields[2:]})
	}
	return cmds
}

func isJSONArgs(args []string) bool {
	for _, a := range args {
		if a == "-j" || strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "j") {
			return true
		}
	}
	return false
}

// resDeliberate lists the recorded command lines for which grdma differs
// from rdma on purpose, with what rdma's output becomes when the
// difference is taken out.
var resDeliberate = map[string]func(rdma string) string{
	// rdma compares dst-addr with an uninitialized buffer for CM IDs that
	// have no destination (the wildcard listener's).
	"res show cm_id dst-addr 192.168.77.1": keepLinesWith("dst-addr "),
}

// keepLinesWith keeps the lines of a text output that contain s.
func keepLinesWith(s string) func(string) string {
	return func(out string) string {
		var kept []string
		for _, l := range strings.SplitAfter(out, "\n") {
			if strings.Contains(l, s) {
				kept = append(kept, l)
			}
		}
		return strings.Join(kept, "")
	}
}

// TestResMatchesRdma runs every recorded rdma res command line with grdma
// on the same recorded kernel state: same exit status (0 or 1), same
// output (text line by line, JSON parsed with key order).
func TestResMatchesRdma(t *testing.T) {
	for _, kv := range kernels {
		info, err := os.ReadFile(filepath.Join(resRecorded(kv), "info.txt"))
		if err != nil {
			t.Fatal(err)
		}
		ver, err := rdmacompat.ParseVersion(string(info))
		if err != nil {
			t.Fatal(err)
		}
		for _, rc := range rdmaCommands(t, kv) {
			t.Run(kv+"/"+rc.file+"_"+strings.Join(rc.args, "_"), func(t *testing.T) {
				want, err := os.ReadFile(filepath.Join(resRecorded(kv), "rdma", rc.file+".txt"))
				if err != nil {
					t.Fatal(err)
				}
				got, stderr, code := runRes(t, resKernel(kv), kv, rc.args...)
				if code != rc.code {
					t.Fatalf("exit %d, rdma exited %d (stderr %q)", code, rc.code, stderr)
				}
				if code != 0 && stderr == "" {
					t.Errorf("failed without a message")
				}
				if adjust, ok := resDeliberate[strings.Join(rc.args, " ")]; ok {
					if adjusted := adjust(string(want)); adjusted != string(want) {
						want = []byte(adjusted)
					} else {
						t.Errorf("the recording no longer shows the deliberate difference")
					}
				}
				var diff string
				if isJSONArgs(rc.args) {
					if diff, err = rdmacompat.DiffJSON(want, []byte(got), ver); err != nil {
						t.Fatal(err)
					}
				} else {
					diff = rdmacompat.DiffText(string(want), got, ver)
				}
				if diff != "" {
					t.Errorf("grdma %s differs from rdma:\n%s", strings.Join(rc.args, " "), diff)
				}
			})
		}
	}
}

// TestResFilters runs filters on the recorded objects: matches on present
// fields, never on absent ones (unlike rdma), 64-bit values, ranges.
func TestResFilters(t *testing.T) {
	cases := []struct {
		args string
		want []string // the objects listed, by their number
	}{
		// GSI and UD QPs have no path-mig-state: as in rdma, a string
		// filter compares the zero value's name (MIGRATED).
		{"res show qp path-mig-state migrated link rxe1", append(seq(17, 34), "1")},
		{"res show qp path-mig-state rearm link rxe1", nil},
		// User CQs have no poll-ctx: they compare as DIRECT (rdma's 0).
		{"res show cq poll-ctx direct dev rxe1", []string{"1", "2", "3"}},
		// Abbreviated keys resolve as rdma's table order says ("s" is
		// sq-psn for QPs, "t" type), and, as in rdma, also filter every
		// later field they abbreviate: "s 0" asks for sq-psn 0 and state
		// "0", which no QP is in; "sq 0" for sq-psn 0 only.
		{"res show qp s 0 link rxe1", nil},
		{"res show qp sq 0 link rxe1", []string{"17", "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29", "30", "31", "32", "33", "34", "1"}},
		// cm_id's dev-type is not reported by the kernel and so matches
		// every CM ID, as in rdma.
		{"res show qp t ud", []string{"34"}},
		{"res show cm_id dev-t ib", []string{"2", "0", "19", "20", "0"}},
		// A key abbreviating dev or link names the device, as in rdma.
		{"res show cm_id d rxe1", []string{"0"}},
		{"res show cm_id transport-type iwarp src-port 7175", []string{"2", "0"}},
		{"res show c dev rxe1 cm-idn 0", []string{"0"}},
		{"res show qp path-mig-state REARM", nil},
		// Kernel QPs have no pid and do not match a range over all pids.
		{"res show qp pid 0-0xffffffffffffffff link rxe0", []string{"17", "18", "19", "20"}},
		{"res show qp comm IBV_UD_PINGPONG", []string{"34"}},
		{"res show qp comm ib_core", []string{"1", "1"}},
		{"res show qp lqpn 18,1-1 link rxe0/1", []string{"18", "1"}},
		{"res show qp lqpn 19 link rxe0/1 type ud", nil},
		{"res show cq poll-ctx workqueue,direct", []string{"0", "1", "2", "3", "4", "0", "1", "2", "3"}},
		{"res show cq cqn 2 dev rxe1", []string{"2"}},
		{"res show mr mrlen 4096-0x1000 dev rxe0", []string{"0", "1"}},
		{"res show cm_id src-port 7175", []string{"2", "0"}},
		{"res show cm_id dst-port 0", []string{"0"}},
		{"res show srq lqpn 4242", nil},
	}
	for _, c := range cases {
		t.Run(c.args, func(t *testing.T) {
			out, stderr, code := runRes(t, resKernel("6.12"), "6.12", append([]string{"-j"}, strings.Fields(c.args)...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var objs []map[string]any
			if err := json.Unmarshal([]byte(out), &objs); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				for _, k := range []string{"lqpn", "cqn", "mrn", "cm-idn", "srqn"} {
					if v, ok := o[k].(float64); ok {
						got = append(got, strconv.Itoa(int(v)))
						break
					}
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("listed %v, want %v", got, c.want)
			}
		})
	}
}

func seq(from, to int) []string {
	var s []string
	for i := from; i <= to; i++ {
		s = append(s, strconv.Itoa(i))
	}
	return s
}

func TestResErrors(t *testing.T) {
	cases := []struct {
		args   string
		code   int
		stderr string
	}{
		{"res show qp lqpn 1-", exitUsage, `bad lqpn filter: "" is not a number (use numbers and ranges, e.g. 1-3,7)`},
		{"res show qp lqpn 3-1", exitUsage, `range "3-1" runs backwards`},
		{"res show mr mrlen 99999999999999999999", exitUsage, "does not fit in 64 bits"},
		{"res show qp state RTSS", exitUsage, `bad state filter: unknown value "RTSS" (expected RESET, INIT, RTR, RTS, SQD, SQE, ERR)`},
		{"res show qp lqpn", exitUsage, "missing lqpn value"},
		{"res show qp frob 1", exitUsage, `unknown filter "frob": expected link, lqpn, rqpn, pid, sq-psn, rq-psn, type, path-mig-state, state, pdn, dev, comm`},
		{"res show cm_id d", exitUsage, "missing dev value"},
		{"res show cm_id d 1", exitFailed, "RDMA device 1 not found"},
		{"res show cm_id src-addr 1.2.3", exitUsage, `bad src-addr filter: "1.2.3" is not an IP address`},
		{"res show qp pid 1 pid 2", exitUsage, "pid given twice"},
		{"res show qp dev rxe0 link rxe1", exitUsage, "link given twice"},
		{"res show cq link rxe0/1", exitUsage, "cq objects belong to a device, not a port: use dev rxe0"},
		{"res show cq link rxe0/-", exitUsage, "cq objects have no port: use dev rxe0"},
		{"res show qp link rxe0/0", exitUsage, "ports are numbered from 1"},
		{"res show qpp", exitUsage, `"qpp" is neither an object (qp, cm_id, cq, mr, pd, ctx, srq) nor an RDMA device (rxe0, rxe1)`},
		{"res show frob rxe0", exitUsage, `unknown object "frob"`},
		{"res frob", exitUsage, `unknown command "frob"`},
		{"res show qp link rxe0/2", exitFailed, "RDMA device rxe0 has no port 2 (it has 1)"},
		{"res show cq dev nosuch", exitFailed, "RDMA device nosuch not found (devices: rxe0, rxe1)"},
		{"-r res show mr dev rxe1", exitFailed, "list raw mr data of RDMA device 1: its driver has no raw form of mr objects"},
	}
	for _, c := range cases {
		t.Run(c.args, func(t *testing.T) {
			out, stderr, code := runRes(t, resKernel("6.12"), "6.12", strings.Fields(c.args)...)
			if code != c.code || !strings.Contains(stderr, c.stderr) {
				t.Fatalf("exit %d, stderr %q (stdout %q); want exit %d and %q", code, stderr, out, c.code, c.stderr)
			}
		})
	}
}

// TestResGolden pins grdma's own res output byte for byte, including what
// rdma 6.1 printed wrongly (an SRQ's comm) and -o, which it lacked.
func TestResGolden(t *testing.T) {
	cases := [][]string{
		{"res"}, {"-j", "res"}, {"-dd", "res", "show", "rxe1"},
		{"res", "show", "qp"}, {"-j", "res", "show", "qp"}, {"-j", "-p", "res", "show", "qp", "link", "rxe1/1", "type", "ud,gsi"},
		{"res", "show", "cm_id"}, {"-j", "res", "show", "cm_id"},
		{"res", "show", "cq"}, {"-j", "res", "show", "mr"}, {"res", "show", "pd"}, {"-j", "res", "show", "ctx"},
		{"res", "show", "srq"}, {"-j", "res", "show", "srq", "lqpn", "19,21-22,4242"}, {"-o", "-dd", "res", "show", "cm_id", "link", "rxe0/-"},
	}
	for _, kv := range kernels {
		for _, args := range cases {
			words := make([]string, len(args))
			for i, a := range args {
				words[i] = strings.NewReplacer("/", "_", ",", "_").Replace(strings.TrimLeft(a, "-"))
			}
			name := kv + "_" + strings.Join(words, "_")
			t.Run(name, func(t *testing.T) {
				got, stderr, code := runRes(t, resKernel(kv), kv, args...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				checkGolden(t, name, got)
			})
		}
	}
}

// driverDetailsKernel answers like a kernel with one device, mlx5_0
// (index 3, one port), whose driver reports attributes for its one QP
// (rxe reports none, so this reply is laid out by hand as the kernel's
// rdma_nl_put_driver_*() writes it).
func driverDetailsKernel(t *testing.T) func(req []netlink.Message) ([]netlink.Message, error) {
	attrs := func(fn func(ae *netlink.AttributeEncoder)) []byte {
		ae := netlink.NewAttributeEncoder()
		fn(ae)
		b, err := ae.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	driver := attrs(func(ae *netlink.AttributeEncoder) {
		key := func(k string) { ae.String(uint16(nldev.AttrDriverString), k) }
		hex := func() { ae.Uint8(uint16(nldev.AttrDriverPrintType), 1) }
		key("sq_wqe_cnt")
		ae.Uint32(uint16(nldev.AttrDriverU32), 64)
		key("qp_flags")
		hex()
		ae.Uint32(uint16(nldev.AttrDriverU32), 0xdeadbeef)
		key("delta")
		ae.Int32(uint16(nldev.AttrDriverS32), -2)
		key("db_addr")
		hex()
		ae.Uint64(uint16(nldev.AttrDriverU64), 1<<32)
		key("name")
		ae.String(uint16(nldev.AttrDriverString), "hw_qp")
		key("rq_wqe_cnt")
		ae.Uint32(uint16(nldev.AttrDriverU32), 128)
		key("sq_head")
		ae.Uint32(uint16(nldev.AttrDriverU32), 5)
	})
	entry := attrs(func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(nldev.AttrPortIndex), 1)
		ae.Uint32(uint16(nldev.AttrResLQPN), 465)
		ae.Uint8(uint16(nldev.AttrResType), 0xff)
		ae.String(uint16(nldev.AttrResSubtype), "REG_UMR")
		ae.Uint8(uint16(nldev.AttrResState), 3)
		ae.Uint32(uint16(nldev.AttrResSQPSN), 0)
		ae.String(uint16(nldev.AttrResKernName), "mlx5_ib")
		ae.Bytes(uint16(nldev.AttrDriver), driver)
	})
	device := func(ae *netlink.AttributeEncoder) {
		ae.Uint32(uint16(nldev.AttrDevIndex), 3)
		ae.String(uint16(nldev.AttrDevName), "mlx5_0")
	}
	return func(req []netlink.Message) ([]netlink.Message, error) {
		var data []byte
		switch cmd := nldev.Command(req[0].Header.Type & 0x3ff); cmd {
		case nldev.CmdGet:
			data = attrs(func(ae *netlink.AttributeEncoder) { device(ae); ae.Uint32(uint16(nldev.AttrPortIndex), 1) })
		case nldev.CmdResQPGet:
			data = attrs(func(ae *netlink.AttributeEncoder) {
				device(ae)
				ae.Bytes(uint16(nldev.AttrResQP), attrs(func(ae *netlink.AttributeEncoder) { ae.Bytes(uint16(nldev.AttrResQPEntry), entry) }))
			})
		default:
			return nltest.Error(int(unix.EOPNOTSUPP), req)
		}
		h := req[0].Header
		return nltest.Multipart([]netlink.Message{{Header: netlink.Header{Type: h.Type, Sequence: h.Sequence, PID: h.PID}, Data: data}, {Header: h}})
	}
}

// TestResDriverDetails: -dd prints the driver's attributes as rdma's
// print_driver_table does (text wrapped once past 80 columns of numbers;
// strings do not count), and in JSON with the values' own sign and width
// (rdma prints them as a C int: 0xdeadbeef would be -559038737).
func TestResDriverDetails(t *testing.T) {
	head := "link mlx5_0/1 lqpn 465 type DRIVER subtype REG_UMR state RTS sq-psn 0 comm [mlx5_ib] "
	cases := []struct{ args, want string }{
		{"-dd res show qp", head + "\n    drv_sq_wqe_cnt 64 drv_qp_flags 0xdeadbeef drv_delta -2 drv_db_addr 0x100000000 drv_name hw_qp drv_rq_wqe_cnt 128 \n    drv_sq_head 5 \n"},
		{"-o -dd res show qp", head + "\\    drv_sq_wqe_cnt 64 drv_qp_flags 0xdeadbeef drv_delta -2 drv_db_addr 0x100000000 drv_name hw_qp drv_rq_wqe_cnt 128 \\    drv_sq_head 5 \n"},
		{"res show qp", head + "\n"},
		{"-j -dd res show qp", `[{"ifindex":3,"ifname":"mlx5_0","port":1,"lqpn":465,"type":"DRIVER","subtype":"REG_UMR","state":"RTS","sq-psn":0,"comm":"mlx5_ib",` +
			`"drv_sq_wqe_cnt":64,"drv_qp_flags":3735928559,"drv_delta":-2,"drv_db_addr":4294967296,"drv_name":"hw_qp","drv_rq_wqe_cnt":128,"drv_sq_head":5}` + "\n]\n"},
	}
	for _, c := range cases {
		t.Run(c.args, func(t *testing.T) {
			var out, errOut bytes.Buffer
			a := newApp(strings.NewReader(""), &out, &errOut)
			a.dial = func() (*nldev.Client, error) { return nldev.NewClient(nltest.Dial(driverDetailsKernel(t))), nil }
			if code := a.main(strings.Fields(c.args)); code != 0 || out.String() != c.want {
				t.Errorf("exit %d (stderr %q), output\n%q\nwant\n%q", code, errOut.String(), out.String(), c.want)
			}
		})
	}
}

// TestResCommEscaped: a process name is chosen by its (possibly
// unprivileged) owner; text output escapes what a terminal would act on,
// so it cannot inject escape sequences into an admin's res output. It
// used to be printed raw, as rdma prints it. JSON escapes it anyway.
func TestResCommEscaped(t *testing.T) {
	root := copyTree(t, filepath.Join(resRecorded("6.12"), "root"))
	os.WriteFile(filepath.Join(root, "proc", "264", "comm"), []byte("\x1b]0;owned\x07\n"), 0o644)
	out, stderr, code := runGrdma(t, resKernel("6.12"), "--sysfs-root", root, "res", "show", "qp")
	if code != 0 || strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, `comm \x1b]0;owned\x07`) {
		t.Fatalf("exit %d, stderr %q, output:\n%q", code, stderr, out)
	}
	out, _, _ = runGrdma(t, resKernel("6.12"), "--sysfs-root", root, "-j", "res", "show", "qp")
	if !strings.Contains(out, `"comm":"\u001b]0;owned\u0007"`) {
		t.Fatalf("JSON:\n%s", out)
	}
}
