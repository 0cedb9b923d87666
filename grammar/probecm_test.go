package grammar

import (
	"errors"
	"strings"
	"testing"

	"github.com/grdma/grdma/cmdline"
	"github.com/grdma/grdma/verbsprobe"
)

func TestParseProbeCM(t *testing.T) {
	for _, tc := range []struct {
		words, want string
	}{
		{"peer 10.0.0.1 cm", "dev= peer=10.0.0.1:18515 test= listen=invalid AddrPort mode="},
		{"rxe0/1 peer 10.0.0.1:7000 cm bw write size 4096", "dev=rxe0 peer=10.0.0.1:7000 test=bw write listen=invalid AddrPort mode="},
		{"listen cm", "dev= peer=invalid AddrPort test= listen=0.0.0.0:18515 mode="},
		{"listen cm 10.0.0.1:7000", "dev= peer=invalid AddrPort test= listen=10.0.0.1:7000 mode="},
		{"rxe0 serve cm :7000", "dev=rxe0 peer=invalid AddrPort test= listen=0.0.0.0:7000 mode="},
		{"serve cm 10.0.0.1", "dev= peer=invalid AddrPort test= listen=10.0.0.1:18515 mode="},
		{"peer 10.0.0.1 cm rping count 3 size 64", "dev= peer=invalid AddrPort test= listen=invalid AddrPort mode=rping [count 3 size 64] raw=10.0.0.1"},
		{"listen cm rping 10.0.0.1", "dev= peer=invalid AddrPort test= listen=invalid AddrPort mode=rping [10.0.0.1] raw="},
	} {
		req, err := ParseProbe(strings.Fields(tc.words))
		if err != nil {
			t.Errorf("%s: %v", tc.words, err)
			continue
		}
		got := "dev=" + req.Options.Device + " peer=" + req.CM.Peer.String() + " test=" + req.Test.String() + " listen=" + req.CM.Addr.String() + " mode=" + req.CM.Mode
		if req.CM.Mode != "" {
			got += " [" + strings.Join(req.CM.ModeArgs, " ") + "] raw=" + req.CM.Raw
		}
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.words, got, tc.want)
		}
	}
	if req, _ := ParseProbe(strings.Fields("peer 10.0.0.1 cm tos 96 lat send")); req.CM == nil || req.CM.ToS == nil || *req.CM.ToS != 96 ||
		req.Test.Kind != verbsprobe.TestLatency {
		t.Errorf("tos: %+v", req.CM)
	}
}

func TestParseProbeCMErrors(t *testing.T) {
	for words, want := range map[string]string{
		"peer hosta cm":                   "IP address",
		"peer 10.0.0.1":                   "needs a device",
		"serve cm":                        "serve cm needs DEV",
		"peer 10.0.0.1 cm pingpong":       "connect, traffic, bw or lat",
		"peer 10.0.0.1 cm auth /k":        "auth",
		"rxe0 cm":                         "two hosts",
		"rxe0 peer 10.0.0.1 tos 3":        "after cm",
		"listen cm lat":                   "peer asks for",
		"listen cm tos 3":                 "client's",
		"peer 10.0.0.1 cm tos 256":        "tos",
		"rxe0 peer 10.0.0.1 rping":        "mode of a probe over the RDMA CM",
		"listen cm 10.0.0.1:99999":        "listen address",
		"rxe0 serve cm rping":             "listen cm rping",
		"peer 10.0.0.1 cm bw write bogus": "bogus",
	} {
		_, err := ParseProbe(strings.Fields(words))
		var ue *cmdline.UsageError
		if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a usage error with %q", words, err, want)
		}
	}
}
