package ib

import "testing"

func TestMTU(t *testing.T) {
	for m, bytes := range map[MTU]int{MTU256: 256, MTU1024: 1024, MTU4096: 4096, MTU8192: 8192, MTU10240: 10240, 0: 0, 8: 0} {
		if got := m.Bytes(); got != bytes {
			t.Errorf("MTU(%d).Bytes() = %d, want %d", m, got, bytes)
		}
		if back, ok := MTUFromBytes(bytes); bytes != 0 && (!ok || back != m) {
			t.Errorf("MTUFromBytes(%d) = %v, %v", bytes, back, ok)
		}
	}
	if MTU2048.String() != "2048" || MTU(9).String() != "invalid MTU 9" {
		t.Errorf("String() = %q, %q", MTU2048.String(), MTU(9).String())
	}
	for bytes, want := range map[int]MTU{255: 0, 256: MTU256, 1420: MTU1024, 4095: MTU2048, 4096: MTU4096, 9000: MTU4096} {
		if got := LargestMTU(bytes); got != want {
			t.Errorf("LargestMTU(%d) = %v, want %v", bytes, got, want)
		}
	}
}

func TestNotFoundError(t *testing.T) {
	for _, c := range []struct {
		err  NotFoundError
		want string
	}{
		{NotFoundError{Device: "rxe9"}, "RDMA device rxe9 not found"},
		{NotFoundError{Device: "rxe9", Existing: []string{}}, "RDMA device rxe9 not found (there are no RDMA devices)"},
		{NotFoundError{Device: "rxe9", Existing: []string{"rxe0", "rxe1"}}, "RDMA device rxe9 not found (devices: rxe0, rxe1)"},
		{NotFoundError{Device: "rxe0", Port: 2}, "RDMA device rxe0 has no port 2"},
		{NotFoundError{Device: "rxe0", Port: 2, NumPorts: 1}, "RDMA device rxe0 has no port 2 (it has 1)"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.err, got, c.want)
		}
	}
}

func TestLinkLayer(t *testing.T) {
	for l, want := range map[LinkLayer]string{LinkLayerUnspecified: "InfiniBand", LinkLayerInfiniBand: "InfiniBand",
		LinkLayerEthernet: "Ethernet", 3: "Unknown", LinkLayerUnknown: "Unknown"} {
		if l.String() != want {
			t.Errorf("LinkLayer(%d) = %q, want %q", l, l, want)
		}
	}
	for s, want := range map[string]LinkLayer{"InfiniBand": LinkLayerInfiniBand, "Ethernet": LinkLayerEthernet, "Unknown": LinkLayerUnknown} {
		if got := ParseLinkLayer(s); got != want || got.String() != s {
			t.Errorf("ParseLinkLayer(%q) = %d %q", s, got, got)
		}
	}
}

func TestWidthAndSpeed(t *testing.T) {
	widths := map[Width]string{Width1X: "1X", Width2X: "2X", Width4X: "4X", Width8X: "8X", Width12X: "12X", 3: ""}
	for w, name := range widths {
		if w.String() != name {
			t.Errorf("Width(%d).String() = %q, want %q", w, w.String(), name)
		}
		if name != "" && WidthFromLanes(w.Lanes()) != w {
			t.Errorf("WidthFromLanes(%d) = %v, want %v", w.Lanes(), WidthFromLanes(w.Lanes()), w)
		}
	}
	if WidthFromLanes(3) != 0 {
		t.Error("WidthFromLanes(3) is a width")
	}
	tests := []struct {
		name string
		want Speed
		deci int
	}{
		{"SDR", SpeedSDR, 25}, {"", SpeedSDR, 25}, {"DDR", SpeedDDR, 50}, {"QDR", SpeedQDR, 100},
		{"FDR10", SpeedFDR10, 100}, {"FDR", SpeedFDR, 140}, {"EDR", SpeedEDR, 250},
		{"HDR", SpeedHDR, 500}, {"NDR", SpeedNDR, 1000}, {"XDR", SpeedXDR, 2000},
	}
	for _, tt := range tests {
		s, ok := ParseSpeed(tt.name)
		if !ok || s != tt.want || s.LaneDeciGbps() != tt.deci || (tt.name != "" && s.String() != tt.name) {
			t.Errorf("ParseSpeed(%q) = %v (%d), %v", tt.name, s, s.LaneDeciGbps(), ok)
		}
	}
	if _, ok := ParseSpeed("GDR"); ok {
		t.Error("ParseSpeed(GDR) succeeded")
	}
	if Speed(512).String() != "" || Speed(512).LaneDeciGbps() != 0 {
		t.Error("an unknown speed code has a name or rate")
	}
}
