package udping

import (
	"fmt"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/uverbs"
)

// Address is where a UD queue pair is reached: what a prober learns of
// its target's responder (over the responder's TCP control channel) and
// what a responder learns of a prober it answers.
type Address struct {
	GID  gid.GID
	QPN  uint32
	QKey uint32
	// MTU is the port's active MTU: the path MTU is the smaller of the
	// two sides'.
	MTU ib.MTU
	// EchoDelay, of a responder, says it answers a probe that asks
	// (FlagEchoDelay) with one echo carrying its delay; a prober sends
	// that flag to no other (an older responder drops such probes as
	// malformed).
	EchoDelay bool
}

func (a Address) String() string {
	return fmt.Sprintf("qpn %#06x gid %s", a.QPN, a.GID)
}

// Validate refuses an address no datagram can go to: what a peer sent
// is checked before anything is made of it.
func (a Address) Validate() error {
	switch {
	case a.QPN == 0 || a.QPN == 1 || a.QPN > 0xffffff:
		return fmt.Errorf("queue pair number %#x is not a UD queue pair's", a.QPN)
	case a.QKey == 0 || a.QKey&0x80000000 != 0:
		return fmt.Errorf("Q_Key %#x: a UD ping uses a Q_Key from 1 to 0x7fffffff", a.QKey)
	case a.GID.IsZero():
		return fmt.Errorf("no GID")
	case a.MTU < ib.MTU256 || a.MTU > ib.MTU4096:
		return fmt.Errorf("MTU %d is not an IB MTU", a.MTU)
	}
	return nil
}

// Local is the device port a responder or prober runs its queue pair on:
// an opened uverbs context (rxe: grdma has no other driver's data path),
// a protection domain on it, and the port's address. verbsprobe.Device
// gives one (Device.UDLocal).
type Local struct {
	Context  *uverbs.Context
	PD       uverbs.PD
	Port     uint8
	GIDIndex uint8
	GID      gid.GID
	// MTU is the port's active MTU.
	MTU ib.MTU
	// Timestamps, when the device reports completion timestamps
	// (QUERY_DEVICE_EX's completion_timestamp_mask), is their clock in
	// kHz; 0 when it has none (rxe). grdma's data path does not read them
	// yet: timestamps are software either way (Timestamps).
	Timestamps uint64
}

// TimestampSource says where a UD ping's times come from.
type TimestampSource string

// Timestamp sources.
const (
	// Software: the clock of the process, read when a completion is
	// polled: the time a datagram waits in the queues until then counts
	// as network time.
	Software TimestampSource = "software"
	// Hardware: the device's completion timestamps (extended completion
	// queues). Not implemented: no device grdma drives has them.
	Hardware TimestampSource = "hardware"
)

// Timestamps returns the timestamp source a UD ping on l uses, and why:
// software, because rxe reports no completion timestamps, or because
// grdma's data path does not read a device's.
func (l Local) TimestampSource() (TimestampSource, string) {
	if l.Timestamps == 0 {
		return Software, "the device has no completion timestamps"
	}
	return Software, "grdma does not read the device's completion timestamps"
}
