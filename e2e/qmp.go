package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A linked guest's QEMU has a QMP socket (machine.qmp) and its NIC the id
// nicID, so that when the guest's link stalls the bed can log the NIC's
// queues as the device model sees them next to what the guest says: which
// side stopped — QEMU not taking the guest's frames, or the guest not
// told of (or not reclaiming) frames QEMU had sent.
const nicID = "nic0"

// qmpTimeout bounds one conversation with QEMU's monitor.
const qmpTimeout = 10 * time.Second

// qmpConn is one QMP session: a JSON object a line each way.
type qmpConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialQMP(path string) (*qmpConn, error) {
	c, err := net.DialTimeout("unix", path, qmpTimeout)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(qmpTimeout))
	q := &qmpConn{c: c, r: bufio.NewReader(c)}
	if _, err := q.r.ReadBytes('\n'); err != nil { // the greeting
		c.Close()
		return nil, err
	}
	if _, err := q.call("qmp_capabilities", nil); err != nil {
		c.Close()
		return nil, err
	}
	return q, nil
}

// call runs one command and returns its "return", skipping events.
func (q *qmpConn) call(cmd string, args any) (json.RawMessage, error) {
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	b, _ := json.Marshal(req)
	if _, err := q.c.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	for {
		line, err := q.r.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		var resp struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Desc string `json:"desc"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &resp); err != nil {
			return nil, fmt.Errorf("qmp: %v: %q", err, line)
		}
		switch {
		case resp.Error != nil:
			return nil, fmt.Errorf("qmp %s: %s", cmd, resp.Error.Desc)
		case resp.Return != nil:
			return resp.Return, nil
		}
	}
}

// hmpWord reads one 16-bit word of guest memory through the human monitor.
func (q *qmpConn) hmpWord(addr uint64) (uint16, error) {
	out, err := q.call("human-monitor-command", map[string]string{"command-line": fmt.Sprintf("xp /1hx %#x", addr)})
	if err != nil {
		return 0, err
	}
	var s string
	json.Unmarshal(out, &s)
	m := hexWord.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("xp: %q", s)
	}
	v, err := strconv.ParseUint(m[1], 16, 16)
	return uint16(v), err
}

var hexWord = regexp.MustCompile(`:\s*0x([0-9a-fA-F]+)`)

// virtqueue is what x-query-virtio-queue-status says of one queue.
type virtqueue struct {
	Num        uint64 `json:"vring-num"`
	Avail      uint64 `json:"vring-avail"`
	Used       uint64 `json:"vring-used"`
	LastAvail  uint16 `json:"last-avail-idx"`
	ShadowIdx  uint16 `json:"shadow-avail-idx"`
	UsedIdx    uint16 `json:"used-idx"`
	InUse      uint32 `json:"inuse"`
	Signalled  uint16 `json:"signalled-used"`
	SignalledV bool   `json:"signalled-used-valid"`
}

// nicQueues describes the NIC's receive (0) and transmit (1) queues as
// QEMU holds them, with the split ring's indices read from guest memory:
// the guest's avail idx and used_event, QEMU's avail_event. A line per
// queue; what went wrong in words, not an error.
func (m *machine) nicQueues() string {
	if m.qmp == "" {
		return "(no QMP socket)"
	}
	q, err := dialQMP(m.qmp)
	if err != nil {
		return fmt.Sprintf("(QMP: %v)", err)
	}
	defer q.c.Close()
	path := "/machine/peripheral/" + nicID + "/virtio-backend"
	var lines []string
	for i, name := range []string{"rx", "tx"} {
		out, err := q.call("x-query-virtio-queue-status", map[string]any{"path": path, "queue": i})
		if err != nil {
			lines = append(lines, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		var v virtqueue
		if err := json.Unmarshal(out, &v); err != nil {
			lines = append(lines, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		// Split ring: avail = flags, idx, ring[num], used_event; used =
		// flags, idx, ring[num] of 8 bytes, avail_event.
		read := func(addr uint64) string {
			w, err := q.hmpWord(addr)
			if err != nil {
				return "?"
			}
			return strconv.Itoa(int(w))
		}
		lines = append(lines, fmt.Sprintf("%s: QEMU took %d (shadow avail %d), in use %d, used %d, signalled %d (valid %v); guest avail %s, used_event %s; QEMU's avail_event %s",
			name, v.LastAvail, v.ShadowIdx, v.InUse, v.UsedIdx, v.Signalled, v.SignalledV,
			read(v.Avail+2), read(v.Avail+4+2*v.Num), read(v.Used+4+8*v.Num)))
	}
	return "    " + strings.Join(lines, "\n    ")
}
