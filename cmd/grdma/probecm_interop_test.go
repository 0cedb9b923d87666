package main

import (
	"strings"
	"testing"
)

// Bad words of the interoperability modes are usage errors (exit 2)
// that name the problem, before anything is opened.
func TestProbeCMInteropUsage(t *testing.T) {
	k := standardKernel("6.12")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"probe", "peer", "10.0.0.2", "cm", "rping", "bogus"}, `unknown rping argument "bogus"`},
		{[]string{"probe", "peer", "10.0.0.2", "cm", "rping", "size", "10"}, "rping takes 26 to 65535"},
		{[]string{"probe", "peer", "10.0.0.2", "cm", "ucmatose", "count", "2000"}, "1 to 1024 messages"},
		{[]string{"probe", "listen", "cm", "rping", "not-an-ip"}, "give an IP address"},
		{[]string{"probe", "listen", "cm", "rping", "tos", "4"}, "tos is the client's"},
		{[]string{"probe", "peer", "10.0.0.2", "cm", "perftest"}, "perftest needs its test: bw|lat write|send|read"},
		{[]string{"probe", "peer", "10.0.0.2", "cm", "perftest", "bandwidth", "write"}, `unknown perftest test "bandwidth"`},
		{[]string{"probe", "peer", "10.0.0.2", "cm", "perftest", "bw"}, "perftest bw needs its operation"},
		{[]string{"probe", "peer", "10.0.0.2", "cm", "perftest", "lat", "atomic"}, `unknown perftest operation "atomic"`},
		{[]string{"probe", "peer", "10.0.0.2", "cm", "perftest", "bw", "write", "count", "5"}, `unknown perftest argument "count"`},
		{[]string{"probe", "peer", "10.0.0.2", "cm", "perftest", "bw", "write", "size", "9000000"}, "size must be a number from 1 to 8388608"},
		{[]string{"probe", "peer", "10.0.0.2", "cm", "perftest", "lat", "send", "iters", "2000000"}, "perftest iters 2000000: 1 to 1000000"},
		{[]string{"probe", "listen", "cm", "perftest", "bw", "write", "tos", "4"}, "tos is the client's"},
		{[]string{"probe", "peer", "10.0.0.2", "cm", "fabtests", "count", "5"}, `unknown fabtests argument "count"`},
		{[]string{"probe", "peer", "10.0.0.2", "cm", "fabtests", "tos", "5"}, `unknown fabtests argument "tos"`},
		{[]string{"probe", "peer", "10.0.0.2", "cm", "fabtests", "size", "70000"}, "size must be a number from 1 to 65535"},
		{[]string{"probe", "peer", "10.0.0.2", "cm", "fabtests", "iters", "2000000"}, "fabtests iters 2000000: 1 to 1048576"},
		{[]string{"probe", "peer", "10.0.0.2", "cm", "fabtests", "iters"}, "iters"},
		{[]string{"probe", "peer", "cm", "fabtests"}, "fabtests is a mode of a probe over the RDMA CM"},
		{[]string{"probe", "listen", "cm", "fabtests", "not-an-ip"}, "give an IP address"},
	} {
		_, stderr, code := runGrdma(t, k, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
