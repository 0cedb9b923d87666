package rdmacm

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A transcript is what one channel said to a real kernel and what the
// kernel answered, recorded in the guest (TestLive with RDMACM_RECORD)
// and replayed by a fake kernel (TestReplay): every command with its
// request, response and errno, and every event, in the order they
// happened. User addresses in requests are zeroed: they differ per run.
type transcript struct {
	Calls []call `json:"calls"`
}

type call struct {
	Cmd   string `json:"cmd"`
	Req   string `json:"req,omitempty"`  // hex, the payload after the header
	Opt   string `json:"opt,omitempty"`  // hex, SET_OPTION's value
	Resp  string `json:"resp,omitempty"` // hex
	Errno int    `json:"errno,omitempty"`

	replayed bool
}

// pointerFields are where requests carry user addresses: the response
// buffer, or SET_OPTION's value.
var pointerFields = map[uint32]int{
	cmdCreateID: 8, cmdDestroyID: 0, cmdQueryRoute: 0, cmdQuery: 0, cmdInitQPAttr: 0, cmdGetEvent: 0, cmdSetOption: 0,
}

// maskedRequest returns the payload of a command with its user address
// zeroed, and the value a SET_OPTION points to. (The address is a pinned
// Go object the request names: as the kernel does, the fake reaches it
// from the number, which checkptr cannot follow.)
//
//go:nocheckptr
func maskedRequest(cmd uint32, msg []byte) (req, opt []byte) {
	req = append([]byte(nil), msg[8:]...)
	if off, ok := pointerFields[cmd]; ok && len(req) >= off+8 {
		if cmd == cmdSetOption {
			ptr := binary.NativeEndian.Uint64(req[off:])
			n := binary.NativeEndian.Uint32(req[20:])
			opt = append([]byte(nil), unsafe.Slice((*byte)(unsafe.Add(nil, ptr)), n)...)
		}
		clear(req[off : off+8])
	}
	return req, opt
}

var commandNumbers = func() map[string]uint32 {
	m := map[string]uint32{}
	for n, name := range commandNames {
		m[name] = n
	}
	return m
}()

// recorder records one channel's transcript.
type recorder struct {
	mu sync.Mutex
	tr transcript
}

func (r *recorder) trace(cmd uint32, msg, resp []byte, err error) {
	c := call{Cmd: commandNames[cmd]}
	req, opt := maskedRequest(cmd, msg)
	if cmd != cmdGetEvent {
		c.Req = hex.EncodeToString(req)
		c.Opt = hex.EncodeToString(opt)
	}
	c.Resp = hex.EncodeToString(resp)
	var errno unix.Errno
	if errors.As(err, &errno) {
		c.Errno = int(errno)
	}
	r.mu.Lock()
	r.tr.Calls = append(r.tr.Calls, c)
	r.mu.Unlock()
}

// fakeKernel replays a transcript: each command must be the next one
// recorded (request compared without user addresses) and gets its
// response and errno; each event becomes readable once the commands
// recorded before it have run. Its readiness is an eventfd, so the
// channel reads events through Go's poller as it does from the device.
type fakeKernel struct {
	t      *testing.T
	name   string
	efd    int
	mu     sync.Mutex
	cmds   []call
	events []call
	after  []int // commands recorded before each event
	done   int   // commands run
	read   int   // events read
	// handle, when set, answers commands instead of a transcript (tests
	// that play a peer the recordings do not have).
	handle func(cmd uint32, req []byte) ([]byte, unix.Errno)
}

// queue makes an event readable at once (with handle).
func (k *fakeKernel) queue(ev eventResp) {
	b, err := binary.Append(nil, binary.NativeEndian, ev)
	if err != nil {
		k.t.Fatal(err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.events = append(k.events, call{Cmd: "GET_EVENT", Resp: hex.EncodeToString(b)})
	k.after = append(k.after, 0)
	k.signal()
}

func newFakeKernel(t *testing.T, name string, tr transcript) *fakeKernel {
	k := &fakeKernel{t: t, name: name}
	for _, c := range tr.Calls {
		if c.Cmd == "GET_EVENT" {
			k.events = append(k.events, c)
			k.after = append(k.after, len(k.cmds))
		} else {
			k.cmds = append(k.cmds, c)
		}
	}
	// The recorder traces a command once its write returns, the event
	// reader an event once read: an event the kernel raised at once (an
	// address resolved in microseconds) can be traced before the command
	// that caused it. Replayed as traced, it would reach the channel
	// before that command's ID waits for it, even before the ID exists,
	// and be dropped. So an event waits for its cause when the cause is
	// the next command traced and none ran since the event before it.
	prev := 0
	for i, ev := range k.events {
		causes := eventCauses[eventType(t, ev)]
		at := k.after[i]
		if at < len(k.cmds) && slices.Contains(causes, k.cmds[at].Cmd) &&
			!slices.ContainsFunc(k.cmds[prev:at], func(c call) bool { return slices.Contains(causes, c.Cmd) }) {
			k.after[i]++
		}
		prev = k.after[i]
	}
	return k
}

// eventCauses names, by event type, the commands of the ID's own that
// make the kernel raise it.
var eventCauses = map[EventType][]string{
	EventAddrResolved: {"RESOLVE_ADDR", "RESOLVE_IP"}, EventAddrError: {"RESOLVE_ADDR", "RESOLVE_IP"},
	EventRouteResolved: {"RESOLVE_ROUTE"}, EventRouteError: {"RESOLVE_ROUTE"},
	EventConnectResponse: {"CONNECT"}, EventConnectError: {"CONNECT", "ACCEPT"}, EventUnreachable: {"CONNECT"},
	EventRejected: {"CONNECT"}, EventEstablished: {"CONNECT", "ACCEPT"},
}

// eventType is a recorded event's type.
func eventType(t *testing.T, ev call) EventType {
	b, err := hex.DecodeString(ev.Resp)
	var r eventResp
	if err == nil {
		_, err = binary.Decode(b, binary.NativeEndian, &r)
	}
	if err != nil {
		t.Fatalf("recorded event %q: %v", ev.Resp, err)
	}
	return EventType(r.Event)
}

// channel opens a Channel on the fake kernel.
func (k *fakeKernel) channel(opts Options) *Channel {
	k.t.Helper()
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		k.t.Fatal(err)
	}
	k.efd = efd
	c, err := newChannel("fake "+k.name, os.NewFile(uintptr(efd), "fake "+k.name), func(_ uintptr, b []byte) (int, error) { return k.write(b) }, opts, nil)
	if err != nil {
		k.t.Fatal(err)
	}
	c.egress = func(netip.Addr) (string, netip.Addr) { return "", netip.Addr{} }
	k.t.Cleanup(func() {
		c.Close()
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.handle == nil && (k.done != len(k.cmds) || k.read != len(k.events)) {
			k.t.Errorf("%s: %d of %d recorded commands and %d of %d events replayed; next command %s",
				k.name, k.done, len(k.cmds), k.read, len(k.events), k.nextName())
		}
	})
	return c
}

func (k *fakeKernel) nextName() string {
	for _, c := range k.cmds {
		if !c.replayed {
			return c.Cmd + " " + c.Req
		}
	}
	return "(none)"
}

// signal makes the eventfd readable while an event is ready, drains it
// otherwise; k.mu is held.
func (k *fakeKernel) signal() {
	var b [8]byte
	if k.read < len(k.events) && k.after[k.read] <= k.done {
		binary.NativeEndian.PutUint64(b[:], 1)
		unix.Write(k.efd, b[:])
		return
	}
	unix.Read(k.efd, b[:])
}

// write answers one command, copying the response to the buffer the
// request names, as the kernel does (see maskedRequest on checkptr).
//
//go:nocheckptr
func (k *fakeKernel) write(msg []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cmd := binary.NativeEndian.Uint32(msg)
	out := int(binary.NativeEndian.Uint16(msg[6:]))
	var rec call
	if cmd == cmdGetEvent {
		if k.read >= len(k.events) || k.after[k.read] > k.done {
			k.signal()
			return 0, unix.EAGAIN
		}
		rec = k.events[k.read]
		k.read++
	} else if k.handle != nil {
		req, _ := maskedRequest(cmd, msg)
		resp, errno := k.handle(cmd, req)
		rec = call{Cmd: commandNames[cmd], Resp: hex.EncodeToString(resp), Errno: int(errno)}
	} else {
		// The next recorded command this one is: the first not yet
		// replayed with the same request (the ID handle in it tells the
		// goroutines of a scenario apart, whose order may differ).
		req, opt := maskedRequest(cmd, msg)
		i := slices.IndexFunc(k.cmds, func(c call) bool {
			return !c.replayed && commandNumbers[c.Cmd] == cmd && c.Req == hex.EncodeToString(req) && c.Opt == hex.EncodeToString(opt)
		})
		if i < 0 {
			k.t.Errorf("%s: command %s %x (option %x) is not in the transcript; next recorded: %s",
				k.name, commandNames[cmd], req, opt, k.nextName())
			return 0, unix.EINVAL
		}
		k.cmds[i].replayed = true
		rec = k.cmds[i]
		k.done++
	}
	defer k.signal()
	if rec.Errno != 0 {
		return 0, unix.Errno(rec.Errno)
	}
	resp, err := hex.DecodeString(rec.Resp)
	if err != nil {
		k.t.Errorf("%s: %v", k.name, err)
		return 0, unix.EINVAL
	}
	if off, ok := pointerFields[cmd]; ok && cmd != cmdSetOption && len(resp) > 0 {
		if len(resp) > out {
			k.t.Errorf("%s: %s: recorded response of %d bytes, room for %d", k.name, rec.Cmd, len(resp), out)
			return 0, unix.ENOSPC
		}
		ptr := binary.NativeEndian.Uint64(msg[8+off:])
		copy(unsafe.Slice((*byte)(unsafe.Add(nil, ptr)), out), resp)
	}
	return len(msg), nil
}

// recording is a set of transcripts recorded in one run, by channel.
type recording struct {
	Kernel   string                `json:"kernel"`
	Addr     string                `json:"addr"`     // the rxe device's IPv4 address
	NoRDMA   string                `json:"no_rdma"`  // an address of a netdev without RDMA device
	Channels map[string]transcript `json:"channels"` // by the scenario's name for them
	Egress   map[string]egressRec  `json:"egress"`   // what egress found, by address
}

// egressRec is what egress answered: the netdev and source address of
// the route.
type egressRec struct {
	Netdev string     `json:"netdev"`
	Src    netip.Addr `json:"src"`
}

func readRecording(path string) (*recording, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r recording
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}
