package verbsprobe

import (
	"fmt"
	"strconv"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/output"
)

// What a peer sends is checked on receipt, before anything of it is
// stored or printed: names (device, driver, link layer, GID type) must be
// what a kernel could have given, and free text (a failure, a verdict)
// has its control characters escaped, so that a peer cannot paint the
// operator's terminal (ESC and OSC sequences) in text or JSON.

// maxPeerName bounds a peer's names: IB_DEVICE_NAME_MAX is 64.
const maxPeerName = 64

// maxPeerText bounds a peer's free text.
const maxPeerText = 1024

// PeerTextError means a peer sent a name that no kernel gives.
type PeerTextError struct {
	Field string // "ifname", "driver", ...
	Value string // quoted
}

func (e *PeerTextError) Error() string {
	return fmt.Sprintf("the peer's %s %s is not a name a kernel gives (at most %d of A-Z a-z 0-9 _ . - :)", e.Field, e.Value, maxPeerName)
}

// checkName refuses a name outside a conservative character set.
func checkName(field, v string) error {
	ok := len(v) <= maxPeerName
	for i := 0; ok && i < len(v); i++ {
		c := v[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' || c == ':'
	}
	if !ok {
		return &PeerTextError{Field: field, Value: strconv.QuoteToASCII(truncate(v, maxPeerName+1))}
	}
	return nil
}

// checkOneOf refuses a value that is none of the allowed ones.
func checkOneOf(field, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return &PeerTextError{Field: field, Value: strconv.QuoteToASCII(truncate(v, maxPeerName+1))}
}

// validate checks the text of an endpoint a peer sent.
func (e Endpoint) validate() error {
	if e.Ifname == "" {
		return &PeerTextError{Field: "ifname", Value: `""`}
	}
	for _, f := range []struct{ name, v string }{{"ifname", e.Ifname}, {"driver", e.Driver}} {
		if err := checkName(f.name, f.v); err != nil {
			return err
		}
	}
	return checkOneOf("GID type", e.GIDType, "", gid.TypeIB.String(), gid.TypeRoCEv1.String(), gid.TypeRoCEv2.String())
}

// peerText makes free text from a peer safe to print: output.Escape (the
// one quoting of untrusted text) of at most maxPeerText bytes of it.
func peerText(s string) string {
	if len(s) > maxPeerText {
		s = s[:maxPeerText] + "…"
	}
	return output.Escape(s)
}

// peerStep is a step name a peer reported, or it quoted.
func peerStep(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c == '_') {
			return strconv.QuoteToASCII(truncate(s, 64))
		}
	}
	return truncate(s, 64)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
