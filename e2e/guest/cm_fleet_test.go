//go:build e2eguest

package guest

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grdma/grdma/e2e/layout"
	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/rdmacm"
	"github.com/grdma/grdma/sysfs"
)

// openLocatedCM opens the RDMA CM as grdma does (locator.OpenRDMACM):
// errors name the device and the RoCE version.
func openLocatedCM(t *testing.T) *rdmacm.Channel {
	t.Helper()
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		t.Fatal(err)
	}
	nl, err := nldev.Dial(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nl.Close() })
	ch, err := locator.OpenRDMACM(fsys, nl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

// TestFleetCM connects by IP address across two guests with package
// rdmacm, against peers nobody here wrote (rping's server and client),
// and meets each failure of the link: nothing listening, and RoCE
// dropped on the way (a connect deadline, then the kernel's own
// UNREACHABLE). After each, neither guest has a CM ID left.
func TestFleetCM(t *testing.T) {
	f := withFleet(t, 2)
	n2 := f.Node(2)
	local := netip.MustParseAddr(f.Node(1).Addr)
	peer := netip.MustParseAddr(n2.Addr)

	t.Run("to_rping_server", func(t *testing.T) {
		t.Cleanup(func() { noCMIDs(t); noCMIDsOn(t, n2.Name, n2.on(t).Run) })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		srv := n2.on(t).ServeCM(7174, layout.Rping, "-s", "-a", n2.Addr, "-p", "7174", "-d")
		c, err := cmDial(ctx, openLocatedCM(t), netip.AddrPortFrom(peer, 7174), -1)
		if c != nil {
			defer c.close()
			for _, s := range c.steps {
				t.Log(s)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.addr.Dst.Addr() != peer || c.addr.Src.Addr() != local || c.route.Paths[0].DGID != peer.As16() {
			t.Errorf("QUERY ADDR %+v, route %+v", c.addr, c.route)
		}
		if err := c.disconnect(ctx); err != nil {
			t.Fatal(err)
		}
		out := srv.Wait()
		if !strings.Contains(out.stdout, "RDMA_CM_EVENT_ESTABLISHED") {
			t.Errorf("rping -s saw no established connection:\n%s", out)
		}
	})

	t.Run("from_rping_client", func(t *testing.T) {
		t.Cleanup(func() { noCMIDs(t); noCMIDsOn(t, n2.Name, n2.on(t).Run) })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		listener := cmListen(t, openLocatedCM(t), local, 7175)
		cli := n2.on(t).Start(layout.Rping, "-c", "-a", local.String(), "-p", "7175", "-C", "1", "-S", "64", "-d")
		a, err := cmAccept(ctx, listener)
		if a != nil {
			defer a.close()
		}
		if err != nil {
			t.Fatal(err)
		}
		if a.req.Addr.Dst.Addr() != peer || a.req.Peer.ResponderResources != 1 || a.req.Peer.RetryCount != 7 {
			t.Errorf("request %+v from %v", a.req.Peer, a.req.Addr)
		}
		// rping's first message: its buffer's address, rkey and size,
		// big-endian (struct rping_rdma_info).
		wc, err := a.e.completion(1)
		if err != nil {
			t.Fatal(err)
		}
		msg := a.e.buf[2048 : 2048+wc.ByteLen]
		if len(msg) != 16 || binary.BigEndian.Uint32(msg[12:]) != 64 {
			t.Errorf("rping sent %x; want 16 bytes ending in size 64", msg)
		}
		if err := a.e.toErr(); err != nil {
			t.Fatal(err)
		}
		if err := a.req.ID.Disconnect(); err != nil {
			t.Fatal(err)
		}
		if err := a.req.ID.WaitDisconnected(ctx); err != nil {
			t.Fatal(err)
		}
		cli.Wait() // it ends with an error: the connection went before its ping
	})

	t.Run("rejected_nothing_listens", func(t *testing.T) {
		t.Cleanup(func() { noCMIDs(t); noCMIDsOn(t, n2.Name, n2.on(t).Run) })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := cmDial(ctx, openLocatedCM(t), netip.AddrPortFrom(peer, 7176), -1)
		if c != nil {
			c.close()
		}
		var e *rdmacm.Error
		if !errors.As(err, &e) || e.Event != rdmacm.EventRejected || rdmacm.RejectReason(e.Status) != rdmacm.RejectInvalidServiceID {
			t.Fatalf("error %v; want REJECTED, reason 8", err)
		}
		t.Log(err)
	})

	t.Run("roce_dropped", func(t *testing.T) {
		t.Cleanup(func() { noCMIDs(t); noCMIDsOn(t, n2.Name, n2.on(t).Run) })
		n2.DropRoCE(t)
		ch := openLocatedCM(t)
		// A deadline of our own first: the error says with what the
		// request went out.
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
		defer cancel()
		c, err := cmDial(ctx, ch, netip.AddrPortFrom(peer, 7177), -1)
		if c != nil {
			c.close()
		}
		var e *rdmacm.Error
		if !errors.As(err, &e) || !errors.Is(err, context.DeadlineExceeded) || e.Step != rdmacm.StepConnect {
			t.Fatalf("error %v; want the connect deadline", err)
		}
		if want := "(RoCE v2, ToS 0, from rxe0/1 (" + local.String() + "))"; !strings.Contains(err.Error(), want) {
			t.Errorf("error %v; want it to say %s", err, want)
		}
		t.Log(err)
		// Then the kernel's: UNREACHABLE once the CM gives up on its
		// retries (ACK timeout 1 makes each try 4.1 s).
		id, err := ch.CreateID(rdmacm.PortSpaceTCP)
		if err != nil {
			t.Fatal(err)
		}
		defer id.Destroy()
		ctx2, cancel2 := context.WithTimeout(context.Background(), 150*time.Second)
		defer cancel2()
		if err := id.ResolveAddr(ctx2, netip.AddrPort{}, netip.AddrPortFrom(peer, 7177), 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := id.SetAckTimeout(1); err != nil {
			t.Fatal(err)
		}
		if err := id.ResolveRoute(ctx2, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		_, err = id.Connect(ctx2, rdmacm.ConnParam{QPNum: 0x123, RetryCount: 7, RNRRetryCount: 7})
		if !errors.As(err, &e) || e.Event != rdmacm.EventUnreachable || !errors.Is(err, syscall.ETIMEDOUT) {
			t.Fatalf("error %v; want UNREACHABLE, ETIMEDOUT", err)
		}
		t.Log(err)
	})
}
