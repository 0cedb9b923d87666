package grammar

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/cmdline"
)

func TestParseCMInterop(t *testing.T) {
	tos := func(n uint8) *uint8 { return &n }
	for _, tc := range []struct {
		mode   string
		words  []string
		raw    string
		listen bool
		want   CMInterop
	}{
		{"rping", nil, "10.0.0.2", false, CMInterop{Mode: "rping", Addr: netip.MustParseAddrPort("10.0.0.2:7174")}},
		{"rping", []string{"count", "3", "size", "128"}, "10.0.0.2:9000", false,
			CMInterop{Mode: "rping", Addr: netip.MustParseAddrPort("10.0.0.2:9000"), Count: 3, Size: 128}},
		{"ucmatose", []string{"tos", "96", "timeout", "5s"}, "fd00::2", false,
			CMInterop{Mode: "ucmatose", Addr: netip.MustParseAddrPort("[fd00::2]:7471"), ToS: tos(96), Timeout: 5 * time.Second}},
		{"rping", nil, "", true, CMInterop{Mode: "rping", Addr: netip.MustParseAddrPort("0.0.0.0:7174")}},
		{"rping", []string{"10.0.0.1", "count", "2"}, "", true, CMInterop{Mode: "rping", Addr: netip.MustParseAddrPort("10.0.0.1:7174"), Count: 2}},
		{"ucmatose", []string{":7000"}, "", true, CMInterop{Mode: "ucmatose", Addr: netip.MustParseAddrPort("0.0.0.0:7000")}},
		{"ucmatose", nil, "10.0.0.1:7001", true, CMInterop{Mode: "ucmatose", Addr: netip.MustParseAddrPort("10.0.0.1:7001")}},
		{"perftest", []string{"bw", "write", "iters", "2000"}, "10.0.0.2", false,
			CMInterop{Mode: "perftest", Addr: netip.MustParseAddrPort("10.0.0.2:18515"), Test: "bw", Op: "write", Count: 2000}},
		{"perftest", []string{"lat", "send", "10.0.0.1", "size", "8388608"}, "", true,
			CMInterop{Mode: "perftest", Addr: netip.MustParseAddrPort("10.0.0.1:18515"), Test: "lat", Op: "send", Size: 8 << 20}},
	} {
		got, err := ParseCMInterop(tc.mode, tc.words, tc.raw, tc.listen)
		if err != nil {
			t.Errorf("%s %q %q: %v", tc.mode, tc.words, tc.raw, err)
			continue
		}
		if got.Mode != tc.want.Mode || got.Addr != tc.want.Addr || got.Count != tc.want.Count || got.Size != tc.want.Size ||
			got.Timeout != tc.want.Timeout || got.Test != tc.want.Test || got.Op != tc.want.Op || (got.ToS == nil) != (tc.want.ToS == nil) || (got.ToS != nil && *got.ToS != *tc.want.ToS) {
			t.Errorf("%s %q %q: %+v, want %+v", tc.mode, tc.words, tc.raw, got, tc.want)
		}
	}
}

func TestParseCMInteropErrors(t *testing.T) {
	for _, tc := range []struct {
		mode   string
		words  []string
		raw    string
		listen bool
		want   string
	}{
		{"rping", nil, "", false, "peer needs an IP address"},
		{"rping", nil, "host.example", false, "give an IP address"},
		{"rping", []string{"count"}, "10.0.0.2", false, "missing count value"},
		{"rping", []string{"count", "0"}, "10.0.0.2", false, "count must be a number from 1"},
		{"rping", []string{"size", "70000"}, "10.0.0.2", false, "size must be a number from 1 to 65535"},
		{"rping", []string{"bogus"}, "10.0.0.2", false, `unknown rping argument "bogus"`},
		{"rping", []string{"count", "1", "count", "2"}, "10.0.0.2", false, "count given twice"},
		{"rping", []string{"tos", "4"}, "", true, "tos is the client's"},
		{"ucmatose", []string{"tos", "256"}, "10.0.0.2", false, "tos must be a number from 0 to 255"},
		{"nope", nil, "10.0.0.2", false, "no interoperability mode"},
	} {
		_, err := ParseCMInterop(tc.mode, tc.words, tc.raw, tc.listen)
		var ue *cmdline.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q %q: %v; want a usage error with %q", tc.mode, tc.words, tc.raw, err, tc.want)
		}
	}
}
