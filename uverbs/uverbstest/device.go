package uverbstest

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
)

// The recorded answers of rxe0 on 6.12 (testdata/README.md).
var (
	//go:embed testdata/query_device_ex.bin
	recordedDevice []byte
	//go:embed testdata/query_port_1.bin
	recordedPort []byte
	//go:embed testdata/num_comp_vectors.txt
	recordedCompVectors string
)

// Port is a fake device's port: what QUERY_PORT answers and how packets
// find it.
type Port struct {
	// State is PortActive unless set; PhysState follows it (LinkUp when
	// ACTIVE, Disabled otherwise) unless set.
	State     ib.PortState
	PhysState ib.PhysState
	// LinkLayer is Ethernet (RoCE) unless set.
	LinkLayer ib.LinkLayer
	// ActiveMTU is 1024 and MaxMTU 4096 unless set.
	ActiveMTU ib.MTU
	MaxMTU    ib.MTU
	// LID addresses the port on InfiniBand (packets without a GRH).
	LID uint16
	// GIDs is the populated GID table (Index, Type and GID of each entry;
	// Port is filled in). Unless set: on Ethernet, the link-local GID of
	// the device's MAC at 0 and the IPv4-mapped GID of Config.IPv4 at 1,
	// both RoCE v2, as rxe has them; on InfiniBand, the link-local GID.
	GIDs []uverbs.GIDEntry
}

// Config describes a fake device. The zero Config is rxe0 on a netdev with
// an address of its own on the fabric, one ACTIVE RoCE port.
type Config struct {
	// Name is the RDMA device ("rxe0") and Node its uverbs device
	// ("uverbs0").
	Name string
	Node string
	// Driver is "rxe" unless set. Any other driver is one whose driver
	// data the fake does not know: GET_CONTEXT works, CREATE_CQ and
	// CREATE_QP fail with EINVAL, as they would without the driver's
	// data.
	Driver string
	// DriverID is the enum rdma_driver_id ioctl headers must name:
	// uverbs.DriverIDRXE for rxe unless set, 0 (none: GET_CONTEXT is the
	// write command) for other drivers.
	DriverID uint32
	// IPv4 is the address of the device's netdev: its IPv4-mapped GID is
	// GID 1 of a default Ethernet port. Unless set, 10.0.0.N for the Nth
	// device of the fabric.
	IPv4 netip.Addr
	// Ports are the device's ports, from port 1; one default Port unless
	// set.
	Ports []Port
	// Attr replaces the recorded device attributes (QUERY_DEVICE); its
	// PhysPortCnt is set from Ports.
	Attr *uverbs.DeviceAttrEx
	// CompVectors is the number of completion vectors (1 unless set).
	CompVectors int
	// ShortReceiveFails makes a UD datagram too long for its receive fail
	// that receive (LOC_QP_OP_ERR) and put the queue pair in the error
	// state, as rxe on 6.1 does; unless set the datagram is dropped and
	// the receive kept for the next, as rxe on 6.12 does.
	ShortReceiveFails bool
	// PinLimit bounds the bytes registered as memory regions on the
	// device, as RLIMIT_MEMLOCK does per process: a REG_MR beyond it
	// fails with ENOMEM. 0 is no limit.
	PinLimit int64
}

// Fabric joins fake devices: a queue pair of one reaches the queue pairs
// of all, addressed by GID (or by LID without a GRH), as a network of
// hosts would. A device's own queue pairs reach each other the same way
// (loopback). Its methods are safe for concurrent use.
type Fabric struct {
	mu      sync.RWMutex
	devices []*Device
	impair  func(Packet) Impairment
}

// NewFabric returns an empty fabric.
func NewFabric() *Fabric { return &Fabric{} }

// NewDevice returns a device on a fabric of its own: its queue pairs reach
// only each other.
func NewDevice(cfg Config) *Device { return NewFabric().NewDevice(cfg) }

// Packet is a message on the fabric: a request (SEND, RDMA WRITE, RDMA
// READ) or its response (an ACK, NAK or read response). Messages are not
// split into MTU-sized packets.
type Packet struct {
	From, To       *Device
	SrcQPN, DstQPN uint32
	PSN            uint32
	Opcode         uverbs.WROpcode // the request's
	Response       bool
	Length         int // payload bytes
	Attempt        int // 0, then 1 for the first retry, ...
}

// Impairment is what happens to a packet: lost, or late.
type Impairment struct {
	Drop  bool
	Delay time.Duration
	// Stuck: the sender's own kernel refuses the UD datagram at output
	// (a firewall there), and rxe 6.1 retries it for ever (rxe_send's
	// -EAGAIN): the send never completes and the send queue waits
	// behind it, trying it again when a later send kicks the queue
	// (6.12 completes it in error instead: ShortReceiveFails' kind of
	// difference). Other transports lose the packet as Drop.
	Stuck bool
}

// Impair makes fn decide the fate of every packet from now on; nil
// delivers all. A lost request or response makes the sender retry after
// its ACK timeout and fail with a retry-exceeded completion when its
// retries run out.
func (f *Fabric) Impair(fn func(Packet) Impairment) {
	f.mu.Lock()
	f.impair = fn
	f.mu.Unlock()
}

func (f *Fabric) impairment(p Packet) Impairment {
	f.mu.RLock()
	fn := f.impair
	f.mu.RUnlock()
	if fn == nil {
		return Impairment{}
	}
	return fn(p)
}

// Device is a fake RDMA device: the kernel and driver (rxe) behind a uverbs
// character device. Open opens it as uverbs.Open opens a real one.
type Device struct {
	fab  *Fabric
	cfg  Config
	attr uverbs.DeviceAttrEx
	mac  [6]byte

	// mu serializes the commands (the control path), as the kernel's
	// object locks would; the data path never takes it.
	mu       sync.Mutex
	ports    []Port
	files    map[*file]bool
	faults   []*fault
	calls    map[Op]int
	removed  bool
	gone     atomic.Bool // removed, for the data path
	rand     *rand.Rand
	nextMmap uint64
	orphans  map[*ring]bool // of destroyed objects, still mapped

	// tab is a leaf lock for what the data path looks up.
	tab     sync.RWMutex
	qps     map[uint32]*qp // by QPN
	mrs     map[uint32]*mr // by index (key >> 8)
	ahs     map[uint32]*ah // by AH number
	nextQPN uint32
	nextMR  uint32
	nextAH  uint32
	pinned  int64
}

// NewDevice adds a device to the fabric.
func (f *Fabric) NewDevice(cfg Config) *Device {
	f.mu.Lock()
	n := len(f.devices) + 1
	d := &Device{fab: f, files: map[*file]bool{}, orphans: map[*ring]bool{}, calls: map[Op]int{}, qps: map[uint32]*qp{}, mrs: map[uint32]*mr{}, ahs: map[uint32]*ah{},
		rand: rand.New(rand.NewPCG(uint64(n), 0x5eed)), nextQPN: 17, nextMR: 1, nextAH: 1, nextMmap: 1}
	f.devices = append(f.devices, d)
	f.mu.Unlock()
	d.mac = [6]byte{0x02, 0x00, 0x00, 0x00, byte(n >> 8), byte(n)}
	d.configure(cfg, n)
	return d
}

// configure fills in the defaults.
func (d *Device) configure(cfg Config, n int) {
	if cfg.Name == "" {
		cfg.Name = "rxe0"
	}
	if cfg.Node == "" {
		cfg.Node = "uverbs0"
	}
	if cfg.Driver == "" {
		cfg.Driver = "rxe"
	}
	if cfg.DriverID == 0 && cfg.Driver == "rxe" {
		cfg.DriverID = uverbs.DriverIDRXE
	}
	if !cfg.IPv4.IsValid() {
		cfg.IPv4 = netip.AddrFrom4([4]byte{10, 0, byte(n >> 8), byte(n)})
	}
	if cfg.CompVectors == 0 {
		cfg.CompVectors, _ = strconv.Atoi(strings.TrimSpace(recordedCompVectors))
	}
	if len(cfg.Ports) == 0 {
		cfg.Ports = []Port{{}}
	}
	if cfg.Attr != nil {
		d.attr = *cfg.Attr
	} else if _, err := binary.Decode(recordedDevice, binary.NativeEndian, &d.attr); err != nil {
		panic(fmt.Sprintf("uverbstest: the recorded device attributes: %v", err))
	}
	// The node GUID is the EUI-64 of the MAC, as rxe makes it.
	guid := d.eui64()
	copy(d.attr.Base.NodeGUID[:], guid[:])
	copy(d.attr.Base.SysImageGUID[:], guid[:])
	d.attr.Base.PhysPortCnt = uint8(len(cfg.Ports))
	d.ports = make([]Port, len(cfg.Ports))
	for i, p := range cfg.Ports {
		d.ports[i] = d.portDefaults(p, uint32(i+1), cfg.IPv4)
	}
	d.cfg = cfg
}

func (d *Device) eui64() [8]byte {
	m := d.mac
	return [8]byte{m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]}
}

func (d *Device) portDefaults(p Port, num uint32, ipv4 netip.Addr) Port {
	if p.State == 0 {
		p.State = ib.PortActive
	}
	if p.PhysState == 0 {
		p.PhysState = physState(p.State)
	}
	if p.LinkLayer == ib.LinkLayerUnspecified {
		p.LinkLayer = ib.LinkLayerEthernet
	}
	if p.ActiveMTU == 0 {
		p.ActiveMTU = ib.MTU1024
	}
	if p.MaxMTU == 0 {
		p.MaxMTU = ib.MTU4096
	}
	if p.GIDs == nil {
		var ll [16]byte
		ll[0], ll[1] = 0xfe, 0x80
		eui := d.eui64()
		copy(ll[8:], eui[:])
		p.GIDs = []uverbs.GIDEntry{{GID: ll, Index: 0, Type: uverbs.GIDTypeRoCEv2}}
		if p.LinkLayer == ib.LinkLayerInfiniBand {
			p.GIDs[0].Type = uverbs.GIDTypeIB
		} else {
			mapped := netip.AddrFrom16(ipv4.As16()).As16()
			if ipv4.Is4() {
				mapped = netip.AddrFrom16(netip.AddrFrom4(ipv4.As4()).As16()).As16()
			}
			p.GIDs = append(p.GIDs, uverbs.GIDEntry{GID: mapped, Index: 1, Type: uverbs.GIDTypeRoCEv2})
		}
	}
	gids := make([]uverbs.GIDEntry, len(p.GIDs))
	for i, g := range p.GIDs {
		g.Port = num
		if g.NetdevIfindex == 0 && p.LinkLayer == ib.LinkLayerEthernet {
			g.NetdevIfindex = 3 // the recorded rxe0's netdev
		}
		gids[i] = g
	}
	p.GIDs = gids
	return p
}

func physState(state ib.PortState) ib.PhysState {
	if state == ib.PortActive {
		return ib.PhysLinkUp
	}
	return ib.PhysDisabled
}

// Name returns the device's RDMA name.
func (d *Device) Name() string { return d.cfg.Name }

// GID returns GID idx of port 1.
func (d *Device) GID(idx int) [16]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, g := range d.ports[0].GIDs {
		if int(g.Index) == idx {
			return g.GID
		}
	}
	return [16]byte{}
}

// Open opens the device and creates a user context on it, as uverbs.Open
// does on a real device.
func (d *Device) Open() (*uverbs.Context, error) {
	f, err := d.openFile()
	if err != nil {
		return nil, err
	}
	return uverbs.NewContext(f, d.cfg.Name, d.Node())
}

// Node returns the device's uverbs node, as package locator would find it
// (the fake has no device number).
func (d *Device) Node() uverbs.Node {
	return uverbs.Node{Name: d.cfg.Node, Driver: d.cfg.Driver, DriverID: d.cfg.DriverID}
}

// Kernel opens the device without creating a context: what
// uverbs.NewContext takes, for tests of GET_CONTEXT itself.
func (d *Device) Kernel() (uverbs.Kernel, error) { return d.openFile() }

// SetPortState changes a port's state (and its physical state with it),
// as a netdev going down or up does: QUERY_PORT reports it, and packets to
// or from a port that is not ACTIVE are lost.
func (d *Device) SetPortState(port uint8, state ib.PortState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tab.Lock()
	defer d.tab.Unlock()
	if p, ok := d.port(port); ok {
		p.State = state
		p.PhysState = physState(state)
	}
}

// Remove makes the device vanish, as a driver unbinding or `rdma link
// delete` does under a running program: every command then fails with
// EIO, completion channels report EIO, its queue pairs stop and packets
// to it are lost.
func (d *Device) Remove() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.removed {
		return
	}
	d.removed = true
	d.gone.Store(true)
	for f := range d.files {
		f.disassociate()
	}
}

// Resources counts what exists on the device: what a test checks is all
// gone after a teardown.
type Resources struct {
	Contexts     int // opened and not closed
	PDs          int
	MRs          int
	CQs          int
	QPs          int
	AHs          int // address handles
	Channels     int // completion channels
	MappedQueues int // rxe queues mapped and not unmapped
	Pinned       int64
}

// Resources returns what exists now.
func (d *Device) Resources() Resources {
	d.mu.Lock()
	defer d.mu.Unlock()
	var r Resources
	for f := range d.files {
		if f.closed {
			continue
		}
		r.Contexts++
		for _, o := range f.objects {
			switch o := o.(type) {
			case *pd:
				r.PDs++
			case *mr:
				r.MRs++
			case *cq:
				r.CQs++
				r.MappedQueues += o.ring.mappedCount()
			case *qp:
				r.QPs++
				r.MappedQueues += o.sq.mappedCount() + o.rq.mappedCount()
			case *ah:
				r.AHs++
			}
		}
		r.Channels += len(f.channels)
	}
	for o := range d.orphans {
		r.MappedQueues += o.mappedCount()
	}
	d.tab.RLock()
	r.Pinned = d.pinned
	d.tab.RUnlock()
	return r
}

// UnreadEvents counts the completion events written to the open
// contexts' channels and not read by the process yet.
func (d *Device) UnreadEvents() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for f := range d.files {
		if f.closed {
			continue
		}
		for _, ch := range f.channels {
			n += ch.unread()
		}
	}
	return n
}

// Op is a uverbs command or ioctl method, as faults name them.
type Op int

// The commands and methods the fake answers.
const (
	OpGetContext      Op = iota // the write command
	OpGetContextIoctl           // UVERBS_METHOD_GET_CONTEXT
	OpQueryDevice               // QUERY_DEVICE
	OpQueryDeviceEx             // the extended QUERY_DEVICE
	OpQueryPort                 // the write command
	OpQueryPortIoctl            // UVERBS_METHOD_QUERY_PORT
	OpQueryGIDTable             // UVERBS_METHOD_QUERY_GID_TABLE
	OpAllocPD
	OpDeallocPD
	OpRegMR
	OpDeregMR
	OpRegDMABufMR
	OpCreateCompChannel
	OpCreateCQ
	OpDestroyCQ
	OpReqNotifyCQ
	OpCreateQP
	OpModifyQP
	OpQueryQP
	OpDestroyQP
	OpPostSend // the doorbell
	OpMmap     // mapping an rxe queue
	OpCreateAH
	OpDestroyAH
	opCount
)

var opNames = [opCount]string{"GET_CONTEXT", "GET_CONTEXT (ioctl)", "QUERY_DEVICE", "EX_QUERY_DEVICE", "QUERY_PORT",
	"QUERY_PORT (ioctl)", "QUERY_GID_TABLE", "ALLOC_PD", "DEALLOC_PD", "REG_MR", "DEREG_MR", "REG_DMABUF_MR",
	"CREATE_COMP_CHANNEL", "CREATE_CQ", "DESTROY_CQ", "REQ_NOTIFY_CQ", "CREATE_QP", "MODIFY_QP", "QUERY_QP",
	"DESTROY_QP", "POST_SEND", "mmap", "CREATE_AH", "DESTROY_AH"}

func (o Op) String() string {
	if o >= 0 && o < opCount {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Fault makes a command fail with an errno before the fake looks at it.
type Fault struct {
	Op Op
	// Nth is the call that fails, counted from Inject: 1 is the next
	// call of Op. 0 fails every call until ClearFaults.
	Nth int
	Err syscall.Errno
}

type fault struct {
	Fault
	left int // calls before the one that fails
}

// Inject adds a fault.
func (d *Device) Inject(f Fault) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = append(d.faults, &fault{Fault: f, left: f.Nth})
}

// ClearFaults removes every fault not yet spent.
func (d *Device) ClearFaults() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = nil
}

// Calls returns how many times op was called (failed calls included).
func (d *Device) Calls(op Op) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[op]
}

// call counts a call of op and returns the error a fault gives it; d.mu is
// held.
func (d *Device) call(op Op) error {
	d.calls[op]++
	if d.removed {
		return syscall.EIO
	}
	for i, f := range d.faults {
		if f.Op != op {
			continue
		}
		if f.Nth == 0 {
			return f.Err
		}
		if f.left--; f.left == 0 {
			d.faults = append(d.faults[:i], d.faults[i+1:]...)
			return f.Err
		}
	}
	return nil
}

// port returns port num (from 1), or false.
func (d *Device) port(num uint8) (*Port, bool) {
	if num == 0 || int(num) > len(d.ports) {
		return nil, false
	}
	return &d.ports[num-1], true
}

// portActive reports whether port num can carry packets, for the data
// path (which reads ports under d.tab: SetPortState holds both locks).
func (d *Device) portActive(num uint8) bool {
	if d.gone.Load() {
		return false
	}
	d.tab.RLock()
	defer d.tab.RUnlock()
	p, ok := d.port(num)
	return ok && p.State == ib.PortActive
}
