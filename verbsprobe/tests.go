package verbsprobe

import (
	"context"
	"fmt"

	"github.com/grdma/grdma/uverbs"
)

// A test is what a probe runs once its queue pairs are in RTS. Each kind
// says, in one place, the Conn it needs (shape), what it readies before
// the peer may send (arm), and the steps each side runs (run); the probe
// and the exchanges do not look at the kind.
type testImpl struct {
	shape func(d *Device, t Test) Shape
	arm   func(e *testEnv) error // nil: nothing to ready
	run   func(e *testEnv) bool  // nil: no steps
}

// testEnv is what a test runs with: the Conn, its side's role and, between
// hosts, the link to the peer.
type testEnv struct {
	ctx  context.Context
	rec  *recorder
	conn *Conn
	test Test
	role string   // "" on this host alone
	link *session // the exchange's connection to the peer; nil on this host alone
}

// linked is an Exchange with a connection to its peer that tests talk
// over (progress, done, verdicts): grdma's and ibv_rc_pingpong's.
type linked interface{ link() *session }

func linkOf(x Exchange) *session {
	if l, ok := x.(linked); ok {
		return l.link()
	}
	return nil
}

// measured records a measurement of this side.
func (e *testEnv) measured(m Measurement) {
	if pr := e.rec.res.Peer; pr != nil {
		pr.Measurements = append(pr.Measurements, m)
	}
}

// step runs one step of the test.
func (e *testEnv) step(name string, fn func() (string, error)) bool {
	return e.rec.step(e.ctx, name, fn)
}

// testFor returns the test of kind t.Kind for role ("" on this host
// alone).
func testFor(t Test, role string) testImpl {
	if role == "" {
		if t.Kind == TestTraffic {
			return testImpl{shape: selfShape, run: runSelfTraffic}
		}
		return testImpl{shape: selfShape}
	}
	impl := peerTests[t.Kind]
	if impl.shape == nil {
		impl.shape = peerShape
	}
	return impl
}

// peerTests are the tests between two hosts, by kind.
var peerTests = map[TestKind]testImpl{
	TestConnect:    {},
	TestTraffic:    {arm: armTraffic, run: runTraffic},
	TestBandwidth:  {arm: armMessages, run: runWatched((*traffic).bandwidth, (*traffic).serveBandwidth)},
	TestLatency:    {arm: armMessages, run: runWatched((*traffic).latency, (*traffic).serveLatency)},
	TestPingpong:   {arm: armMessages, run: runPingpong},
	TestUDPingpong: {shape: udPingpongShape, arm: armMessages, run: runPingpong},
}

// selfShape is the probe of one host: small queues; traffic registers its
// region as a step of its own.
func selfShape(_ *Device, t Test) Shape {
	access := uverbs.AccessLocalWrite
	if t.Kind == TestTraffic {
		access |= uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead // it writes and reads itself
	}
	return Shape{CQE: cqEntries, Cap: uverbs.QPCap{MaxSendWR: queueDepth, MaxRecvWR: queueDepth, MaxSendSGE: 1, MaxRecvSGE: 1},
		Access: access, RdAtomic: rdAtomicSize}
}

// Queue shapes of the tests between hosts.
const (
	bwWindow    = 128 // outstanding requests of a bw test (perftest's tx depth)
	pingpongRX  = 500 // ibv_rc_pingpong's receive depth
	latencyRecv = 16
	// latencyInline: lat write and send messages up to this size go
	// inline (uverbs.SendWR.Inline), as perftest's do (its default inline
	// size for RDMA WRITE).
	latencyInline = 220
)

// peerShape sizes a Conn for a test between two hosts: its queues, its
// memory region (none for connect, traffic's four parts of at least
// payloadSize, else a source and a target of Size bytes), the access the
// peer needs and the RDMA READs outstanding.
func peerShape(d *Device, t Test) Shape {
	send, recv := uint32(queueDepth), uint32(queueDepth)
	switch t.Kind {
	case TestBandwidth:
		send, recv = bwWindow, bwWindow
	case TestPingpong:
		recv = pingpongRX
	case TestLatency:
		recv = latencyRecv
	}
	s := Shape{CQE: send + recv, Cap: uverbs.QPCap{MaxSendWR: send, MaxRecvWR: recv, MaxSendSGE: 1, MaxRecvSGE: 1},
		Access: testAccess(t), RdAtomic: rdAtomicSize}
	if t.Kind == TestLatency && t.Op != OpRead && t.Size <= latencyInline {
		s.Cap.MaxInlineData = latencyInline
	}
	switch t.Kind {
	case TestConnect:
	case TestTraffic:
		s.Part, s.Parts = max(t.Size, payloadSize), regionCount
	default:
		s.Part, s.Parts = t.Size, 2
	}
	if t.Op == OpRead || t.Kind == TestTraffic {
		s.RdAtomic = d.maxRdAtomic(16)
	}
	return s
}

// testAccess is what the queue pair and memory region of a test between
// two hosts let the peer do: write into them for write tests, read them
// for read tests, both for traffic, nothing remote otherwise
// (ibv_rc_pingpong's choice).
func testAccess(t Test) uverbs.Access {
	a := uverbs.AccessLocalWrite
	switch {
	case t.Kind == TestTraffic:
		a |= uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
	case t.Op == OpWrite:
		a |= uverbs.AccessRemoteWrite
	case t.Op == OpRead:
		a |= uverbs.AccessRemoteRead
	}
	return a
}

// dataPath returns the Conn's data path, or an error naming what the
// driver lacks.
func (e *testEnv) dataPath() (*traffic, bool) {
	t, ok := newTraffic(e)
	if ok {
		return t, true
	}
	res, d := e.rec.res, e.conn.dev
	if e.role == "" {
		res.Unsupported = fmt.Sprintf("traffic on driver %s not supported by the probe: it needs the driver's data path (WQE format, doorbells), which grdma does not have; the queue pair reached RTS",
			d.driverName)
		return nil, false
	}
	res.Unsupported = fmt.Sprintf("%s needs driver %s's data path (WQE format, doorbells), which grdma does not have; the queue pair reached RTS against the peer",
		e.test, d.driverName)
	if e.link != nil {
		e.link.reportFailure(e.test.stepName(), fmt.Errorf("%s", res.Unsupported))
	}
	return nil, false
}

// runSelfTraffic sends through the queue pair connected to itself.
func runSelfTraffic(e *testEnv) bool {
	t, ok := e.dataPath()
	if !ok {
		return false
	}
	c := e.conn
	c.shape.Part, c.shape.Parts = payloadSize, regionCount
	return e.rec.steps([]stepFunc{
		{StepRegMR, c.regMR},
		{StepSend, t.send},
		{StepRDMAWrite, t.rdmaWrite},
		{StepRDMARead, t.rdmaRead},
	})
}

// runTraffic: the client sends, writes and reads, the server checks.
func runTraffic(e *testEnv) bool {
	t, ok := e.dataPath()
	if !ok {
		return false
	}
	if e.role == RoleClient {
		return e.rec.steps([]stepFunc{{StepSend, t.peerSend}, {StepRDMAWrite, t.peerWrite}, {StepRDMARead, t.peerRead}})
	}
	return e.rec.steps([]stepFunc{{StepSend, t.checkSend}, {StepRDMAWrite, t.checkWrite}, {StepRDMARead, t.servedRead}})
}

// runWatched runs a bw or lat test: client's or server's side, both
// following the peer's messages while the queues run (the server its
// progress and done, the client a failure of its server).
func runWatched(client, server func(*traffic) (string, error)) func(*testEnv) bool {
	return func(e *testEnv) bool {
		t, ok := e.dataPath()
		if !ok {
			return false
		}
		e.link.readInBackground()
		side := server
		if e.role == RoleClient {
			side = client
		}
		return e.step(e.test.stepName(), func() (string, error) { return side(t) })
	}
}

func runPingpong(e *testEnv) bool {
	t, ok := e.dataPath()
	if !ok {
		return false
	}
	return e.step(e.test.stepName(), t.pingpong)
}
