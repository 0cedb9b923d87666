package sweep

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/grdma/grdma/output"
)

// ProtocolVersion is the version of the sweep's control protocol, which
// keeps the nodes of a launched sweep in step without MPI. A node refuses
// a partner of another version.
//
// Every node listens on one TCP port for the whole run. A connection's
// first line says what it is: a control message of the sweep (JSON with
// "grdma_sweep") or the hello of a probe client (verbsprobe's exchange,
// "grdma_probe"), which is handed to the test the node is serving, and
// only when it comes from the partner's address and asks for the planned
// test.
//
// In each round, pair member A dials B's port and asks for the round:
//
//	A → B  {"grdma_sweep":1,"type":"hello","sweep":ID,"round":K,"from":A,"to":B,"about":"...","down":[...]}
//	B → A  {"type":"ready"}                      B is in round K, waiting for A: the pair runs
//	       {"type":"wait","round":J}             B is alive but still in round J < K: A asks again
//	       {"type":"gone","round":J,"error":...} B went past round K (it took A for unreachable)
//	       {"type":"refused","error":...}        other parameters, or B's device failed
//
// While B waits for A's hello it asks A how it is doing, on a connection
// of its own:
//
//	B → A  {"grdma_sweep":1,"type":"status","from":B,"down":[...]}
//	A → B  {"type":"status","round":J,"done":false,"down":[...]}
//
// A partner that answers is alive, however far behind; one that has not
// answered for the timeout is recorded as not answering. "down" carries
// the ranks the sender found unreachable, so that the others skip them
// instead of waiting for them too. After "ready", for each test of the
// pair's Plan the server says it is serving, the client runs the test,
// and both say how it went:
//
//	server → client  {"type":"serving","test":I}
//	client → server  {"type":"done","test":I,"ok":true}
//	server → client  {"type":"done","test":I,"ok":true}
const ProtocolVersion = 1

// Message types.
const (
	msgHello   = "hello"
	msgStatus  = "status"
	msgReady   = "ready"
	msgWait    = "wait"
	msgGone    = "gone"
	msgRefused = "refused"
	msgServing = "serving"
	msgDone    = "done"
)

// maxLine bounds one line of the control protocol (and the first line of
// a probe connection): "down" lists at most every rank.
const maxLine = 1 << 20

// maxText bounds a peer's free text (errors, reasons) kept in records.
const maxText = 512

// message is one line of the control protocol; Type says which fields
// count.
type message struct {
	Version int    `json:"grdma_sweep,omitempty"`
	Type    string `json:"type"`
	Sweep   string `json:"sweep,omitempty"`
	Round   int    `json:"round,omitempty"`
	From    int    `json:"from"`
	To      int    `json:"to"`
	// About is the sender's parameters in words, for the refusal of a
	// partner that runs others.
	About string `json:"about,omitempty"`
	Test  int    `json:"test"`
	OK    bool   `json:"ok,omitempty"`
	Done  bool   `json:"done,omitempty"`
	Step  string `json:"step,omitempty"`
	Error string `json:"error,omitempty"`
	// Broken says the sender's device failed at start.
	Broken bool  `json:"broken,omitempty"`
	Down   []int `json:"down,omitempty"`
}

// peerText makes a peer's text safe to keep and print: printable, and
// bounded.
func peerText(s string) string {
	if len(s) > maxText {
		s = s[:maxText] + "..."
	}
	return output.Escape(s)
}

// ctlConn is a control connection: JSON lines both ways, every read and
// write within a deadline.
type ctlConn struct {
	conn net.Conn
	rd   *bufio.Reader
}

func newCtlConn(c net.Conn, rd *bufio.Reader) *ctlConn {
	if rd == nil {
		rd = bufio.NewReaderSize(c, 4096)
	}
	return &ctlConn{conn: c, rd: rd}
}

func (c *ctlConn) send(m message, timeout time.Duration) error {
	m.Version = ProtocolVersion
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c.conn.SetWriteDeadline(time.Now().Add(timeout))
	_, err = c.conn.Write(append(b, '\n'))
	return err
}

func (c *ctlConn) receive(timeout time.Duration) (message, error) {
	c.conn.SetReadDeadline(time.Now().Add(timeout))
	line, err := readLine(c.rd)
	if err != nil {
		return message{}, err
	}
	return parseMessage(line)
}

func (c *ctlConn) close() { c.conn.Close() }

// errLineTooLong is a line over maxLine.
var errLineTooLong = errors.New("line too long")

// readLine reads one line of at most maxLine bytes, without the newline.
func readLine(rd *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := rd.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine {
			return nil, errLineTooLong
		}
		switch {
		case err == nil:
			return bytes.TrimRight(line, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// parseMessage decodes a control message and checks its version.
func parseMessage(line []byte) (message, error) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		return message{}, fmt.Errorf("not a grdma sweep message: %v", err)
	}
	if m.Version != ProtocolVersion {
		return message{}, fmt.Errorf("the partner speaks grdma sweep protocol %d, this node %d: run the same grdma on every node", m.Version, ProtocolVersion)
	}
	m.Error, m.Step, m.About = peerText(m.Error), peerText(m.Step), peerText(m.About)
	return m, nil
}
