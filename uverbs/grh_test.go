package uverbs

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// rxeIPv4GRH is what rxe0 on 6.1 wrote in front of a 64-byte UD payload
// from 192.168.77.1 to itself (union rdma_network_hdr: 20 zero bytes,
// then the IPv4 header, its checksum 0 on loopback), as
// TestUDFakeMatchesRxe logged it.
const rxeIPv4GRH = "00000000 00000000 00000000 00000000 00000000" +
	"4500 0074 a625 4000 4011 0000 c0a84d01 c0a84d01"

func TestParseGRHIPv4(t *testing.T) {
	b, _ := hex.DecodeString(strings.ReplaceAll(rxeIPv4GRH, " ", ""))
	g, err := ParseGRH(b)
	if err != nil {
		t.Fatal(err)
	}
	self := ipv4GID([4]byte{192, 168, 77, 1})
	want := GRH{IPv4: true, SGID: self, DGID: self, HopLimit: 64, NextHeader: 17, PayloadLength: 0x74 - 20}
	if g != want {
		t.Errorf("got %+v\nwant %+v", g, want)
	}
	// UDP 8 + BTH 12 + DETH 8 + payload 64 + ICRC 4.
	if g.PayloadLength != 8+12+8+64+4 {
		t.Errorf("payload length %d", g.PayloadLength)
	}
	// AppendGRH writes the same but for the IP ID and a real checksum.
	again := AppendGRH(nil, g)
	if ipChecksum(again[20:]) != 0 {
		t.Errorf("AppendGRH's checksum: % x", again)
	}
	again[24], again[25], again[30], again[31] = b[24], b[25], 0, 0
	if hex.EncodeToString(again) != hex.EncodeToString(b) {
		t.Errorf("AppendGRH % x\nwant       % x", again, b)
	}
}

func TestParseGRHIPv6(t *testing.T) {
	g := GRH{SGID: [16]byte{0: 0xfe, 1: 0x80, 15: 2}, DGID: [16]byte{0: 0xfe, 1: 0x80, 15: 1}, TrafficClass: 0xb8,
		FlowLabel: 0x12345, HopLimit: 64, NextHeader: 17, PayloadLength: 96}
	b := AppendGRH(nil, g)
	if len(b) != GRHSize || b[0]>>4 != 6 {
		t.Fatalf("% x", b)
	}
	got, err := ParseGRH(b)
	if err != nil || got != g {
		t.Errorf("got %+v, %v\nwant %+v", got, err, g)
	}
}

// TestParseGRHHostile: a sender controls the header rxe copies; anything
// that is not a whole, valid header is refused, never read past the 40
// bytes.
func TestParseGRHHostile(t *testing.T) {
	good := AppendGRH(nil, GRH{IPv4: true, HopLimit: 64, NextHeader: 17, PayloadLength: 40,
		SGID: ipv4GID([4]byte{1, 2, 3, 4}), DGID: ipv4GID([4]byte{5, 6, 7, 8})})
	mod := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	for name, c := range map[string]struct {
		b     []byte
		noGRH bool
	}{
		"short":           {good[:39], false},
		"empty":           {nil, false},
		"zero":            {make([]byte, 40), true},
		"junk in front":   {mod(func(b []byte) { b[3] = 1 }), true},
		"IPv4 options":    {mod(func(b []byte) { b[20] = 0x46 }), false},
		"version 5":       {mod(func(b []byte) { b[20] = 0x55 }), false},
		"total too small": {AppendGRH(nil, GRH{IPv4: true, PayloadLength: 0xffff - 19}), false},
	} {
		_, err := ParseGRH(c.b)
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if errors.Is(err, ErrNoGRH) != c.noGRH {
			t.Errorf("%s: %v (ErrNoGRH %v)", name, err, c.noGRH)
		}
	}
}

func FuzzParseGRH(f *testing.F) {
	b, _ := hex.DecodeString(strings.ReplaceAll(rxeIPv4GRH, " ", ""))
	f.Add(b)
	f.Add(AppendGRH(nil, GRH{HopLimit: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := ParseGRH(b)
		if err != nil {
			return
		}
		again, err := ParseGRH(AppendGRH(nil, g))
		if err != nil || again != g {
			t.Errorf("%+v did not survive AppendGRH: %+v, %v", g, again, err)
		}
	})
}
