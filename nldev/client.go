package nldev

import (
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ClientNLDEV is the RDMA netlink client number of the device API
// (RDMA_NL_NLDEV); message types are ClientNLDEV<<10 | command.
const ClientNLDEV = 5

// MessageType returns the netlink message type of an NLDEV command
// (RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd)).
func MessageType(cmd Command) netlink.HeaderType {
	return netlink.HeaderType(ClientNLDEV<<10 | uint16(cmd))
}

// maxDumpRetries bounds how often a dump interrupted by a concurrent change
// (NLM_F_DUMP_INTR) is restarted before giving up.
const maxDumpRetries = 10

// ErrNoRDMANetlink means the kernel has no NETLINK_RDMA socket family.
var ErrNoRDMANetlink = errors.New("the kernel has no RDMA netlink support; load ib_core")

// ErrDumpInterrupted means every retry of a dump was interrupted by
// concurrent changes (devices added, removed or renamed meanwhile).
var ErrDumpInterrupted = errors.New("the RDMA device list kept changing during the dump; try again")

// Config configures a Client.
type Config struct {
	// NetNS, when non-zero, is a file descriptor of the network namespace
	// whose RDMA netlink to talk to.
	NetNS int
}

// Client speaks RDMA_NLDEV over one NETLINK_RDMA socket. Unlike iproute2
// rdma, which opens a socket per request, a Client reuses its socket.
// A Client is safe for use by one goroutine at a time.
type Client struct {
	t transport
}

// Dial opens a NETLINK_RDMA socket with extended acknowledgements on.
func Dial(cfg *Config) (*Client, error) {
	var c *blockingSocket
	var err error
	if cfg == nil || cfg.NetNS == 0 {
		c, err = dialBlocking()
	} else {
		c, err = dialBlockingIn(cfg.NetNS)
	}
	if err != nil {
		if errors.Is(err, unix.EPROTONOSUPPORT) {
			return nil, ErrNoRDMANetlink
		}
		return nil, fmt.Errorf("open RDMA netlink socket: %w", err)
	}
	return &Client{t: c}, nil
}

// NewClient wraps an existing netlink connection, e.g. one from nltest.Dial.
func NewClient(c *netlink.Conn) *Client { return &Client{t: connTransport{c}} }

// Close closes the socket.
func (c *Client) Close() error { return c.t.close() }

// request encodes attributes into a request message of the given command.
func request(cmd Command, flags netlink.HeaderFlags, encode func(ae *netlink.AttributeEncoder)) (netlink.Message, error) {
	m := netlink.Message{Header: netlink.Header{Type: MessageType(cmd), Flags: netlink.Request | flags}}
	if encode != nil {
		ae := netlink.NewAttributeEncoder()
		encode(ae)
		b, err := ae.Encode()
		if err != nil {
			return m, err
		}
		m.Data = b
	}
	return m, nil
}

// execute runs a doit request. Data requests are sent without NLM_F_ACK,
// since the kernel would follow the reply with a separate ACK that the next
// request would then read; write requests (no data reply) ask for the ACK.
func (c *Client) execute(cmd Command, ack bool, encode func(ae *netlink.AttributeEncoder)) ([]netlink.Message, error) {
	var flags netlink.HeaderFlags
	if ack {
		flags = netlink.Acknowledge
	}
	req, err := request(cmd, flags, encode)
	if err != nil {
		return nil, err
	}
	return c.t.execute(req)
}

// get runs a doit request and decodes its single reply with fn.
func (c *Client) get(cmd Command, encode func(ae *netlink.AttributeEncoder), fn func(ad *netlink.AttributeDecoder) error) error {
	return c.getData(cmd, encode, func(b []byte) error { return decodeMessage(b, fn) })
}

// getData runs a doit request and hands its single reply's attribute
// bytes to fn.
func (c *Client) getData(cmd Command, encode func(ae *netlink.AttributeEncoder), fn func(data []byte) error) error {
	msgs, err := c.execute(cmd, false, encode)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type != MessageType(cmd) && m.Header.Type != MessageType(CmdGet) {
			continue // PORT_GET replies carry the GET type
		}
		return fn(m.Data)
	}
	return fmt.Errorf("%s: the kernel sent no reply", cmd)
}

// errInterrupted is returned by dumpOnce when NLM_F_DUMP_INTR was seen.
var errInterrupted = errors.New("dump interrupted")

// dumpOnce streams one dump: fn sees each reply message as it arrives, so
// memory stays flat however many objects the kernel returns.
func (c *Client) dumpOnce(cmd Command, encode func(ae *netlink.AttributeEncoder), fn func(data []byte) error) error {
	req, err := request(cmd, netlink.Dump, encode)
	if err != nil {
		return err
	}
	var fnErr error
	interrupted := false
	for m, err := range c.t.dump(req) {
		if err != nil {
			return err
		}
		if m.Header.Flags&netlink.DumpInterrupted != 0 {
			interrupted = true
		}
		if fnErr == nil && !interrupted && m.Header.Type != netlink.Done {
			fnErr = fn(m.Data)
		}
	}
	if fnErr != nil {
		return fnErr
	}
	if interrupted {
		return errInterrupted
	}
	return nil
}

// dump runs a dump, restarting it when a concurrent change interrupts it;
// reset is called before every attempt so the caller discards partial results.
func (c *Client) dump(cmd Command, encode func(ae *netlink.AttributeEncoder), reset func(), fn func(data []byte) error) error {
	for range maxDumpRetries {
		reset()
		err := c.dumpOnce(cmd, encode, fn)
		if !errors.Is(err, errInterrupted) {
			return err
		}
	}
	return ErrDumpInterrupted
}

// decodeMessage decodes a message's attributes with fn.
func decodeMessage(b []byte, fn func(ad *netlink.AttributeDecoder) error) error {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return err
	}
	return fn(ad)
}
