package pingmesh

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/grdma/grdma/verbsprobe"
	"go.yaml.in/yaml/v2"
)

// Target is one peer to probe: its responder's address and the labels
// its file_sd group gave it (rack, tor, rail, ...).
type Target struct {
	// Address is host or host:port as the file has it; the port is the
	// responder's TCP port (DefaultPort when left out).
	Address string
	// Labels are the group's labels, without those Prometheus keeps for
	// relabelling only (names starting with "__").
	Labels map[string]string
}

// DefaultPort is the responder's TCP port (`grdma probe DEV serve`,
// verbsprobe.DefaultPeerPort) where a target names none.
const DefaultPort = 18515

// HostPort is the target's address with its port: host:port
// (verbsprobe.PeerAddress).
func (t Target) HostPort() string {
	hp, err := verbsprobe.PeerAddress(t.Address)
	if err != nil {
		return t.Address
	}
	return hp
}

// Limits of a targets file: what the collector keeps in memory is bounded
// whatever the file says.
const (
	MaxTargets       = 10_000
	MaxTargetsBytes  = 8 << 20
	maxLabels        = 32
	maxLabelValueLen = 1024
	maxAddressLen    = 255
)

// group is one element of a file_sd file.
type group struct {
	Targets []string          `yaml:"targets" json:"targets"`
	Labels  map[string]string `yaml:"labels" json:"labels"`
}

var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// ParseTargets reads a file in Prometheus' file_sd format: a list of
// groups, each with targets and labels, as JSON (name ending .json) or
// YAML (.yml, .yaml). It refuses what Prometheus refuses (unknown fields,
// label names that are not label names, values that are not UTF-8) and
// what the collector cannot probe: an address that is not host or
// host:port, the same address twice, more than MaxTargets targets.
func ParseTargets(name string, data []byte) ([]Target, error) {
	if len(data) > MaxTargetsBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than %d", name, len(data), MaxTargetsBytes)
	}
	var groups []group
	var err error
	switch ext := filepath.Ext(name); ext {
	case ".json":
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		err = dec.Decode(&groups)
	case ".yml", ".yaml":
		err = yaml.UnmarshalStrict(data, &groups)
	default:
		return nil, fmt.Errorf("%s: a targets file is .json, .yml or .yaml, as Prometheus' file_sd reads it", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var targets []Target
	seen := map[string]int{}
	for gi, g := range groups {
		labels := map[string]string{}
		for k, v := range g.Labels {
			switch {
			case !labelName.MatchString(k):
				return nil, fmt.Errorf("%s: group %d: %q is not a label name", name, gi+1, k)
			case !utf8.ValidString(v):
				return nil, fmt.Errorf("%s: group %d: the value of label %s is not UTF-8", name, gi+1, k)
			case len(v) > maxLabelValueLen:
				return nil, fmt.Errorf("%s: group %d: the value of label %s is longer than %d bytes", name, gi+1, k, maxLabelValueLen)
			case strings.HasPrefix(k, "__"):
				continue // Prometheus drops these after relabelling
			}
			labels[k] = v
		}
		if len(labels) > maxLabels {
			return nil, fmt.Errorf("%s: group %d: %d labels, at most %d", name, gi+1, len(labels), maxLabels)
		}
		for _, a := range g.Targets {
			if err := checkAddress(a); err != nil {
				return nil, fmt.Errorf("%s: group %d: %w", name, gi+1, err)
			}
			t := Target{Address: a, Labels: labels}
			if prev, dup := seen[t.HostPort()]; dup {
				return nil, fmt.Errorf("%s: group %d: target %s is also in group %d", name, gi+1, a, prev)
			}
			seen[t.HostPort()] = gi + 1
			targets = append(targets, t)
			if len(targets) > MaxTargets {
				return nil, fmt.Errorf("%s: more than %d targets", name, MaxTargets)
			}
		}
	}
	return targets, nil
}

// checkAddress accepts host, host:port, an IPv6 address alone or in
// brackets with a port (verbsprobe.PeerAddress); not a URL.
func checkAddress(a string) error {
	bad := func(why string) error {
		return fmt.Errorf("target %q: %s; give host or host:port (the responder's port, %d when left out)", a, why, DefaultPort)
	}
	switch {
	case len(a) > maxAddressLen:
		return bad(fmt.Sprintf("longer than %d bytes", maxAddressLen))
	case strings.ContainsAny(a, "/?#@ \t\n"):
		return bad("not an address")
	}
	if _, err := verbsprobe.PeerAddress(a); err != nil {
		return bad(err.Error())
	}
	return nil
}

// TargetsFile is a targets file re-read when it changes: Load returns
// the targets of the last good reading, and a file that cannot be read
// or parsed keeps them (and is counted).
type TargetsFile struct {
	Path string

	mu      sync.Mutex
	stamp   fileStamp
	targets []Target
	loaded  bool
	errs    float64
	lastErr error
	lastOK  time.Time
	ok      bool
}

// fileStamp tells a changed file apart: a Kubernetes ConfigMap update
// replaces a symbolic link (another inode), an editor rewrites in place
// (another mtime or size).
type fileStamp struct {
	ino   uint64
	mtime time.Time
	size  int64
}

// Reload reads the file if it changed since the last reading (or was
// never read). It returns whether the targets changed, and the error of
// this reading, if any: then the targets are those of the last good one.
func (f *TargetsFile) Reload() (changed bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.Path)
	if err != nil {
		return false, f.failed(fileStamp{}, err)
	}
	st := fileStamp{mtime: fi.ModTime(), size: fi.Size(), ino: inode(fi)}
	if st == f.stamp && f.lastErr != nil {
		return false, f.lastErr // the same broken file: counted once
	}
	if st == f.stamp && f.loaded {
		return false, nil
	}
	if fi.Size() > MaxTargetsBytes {
		return false, f.failed(st, fmt.Errorf("%s: %d bytes, more than %d", f.Path, fi.Size(), MaxTargetsBytes))
	}
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return false, f.failed(st, err)
	}
	targets, err := ParseTargets(f.Path, data)
	if err != nil {
		return false, f.failed(st, err)
	}
	changed = !f.loaded || !slices.EqualFunc(targets, f.targets, equalTarget)
	f.stamp, f.targets, f.loaded, f.lastErr, f.ok, f.lastOK = st, targets, true, nil, true, time.Now()
	return changed, nil
}

// failed keeps the targets and counts the error, once for as long as the
// file stays the same (a missing file, polled again, is one error).
func (f *TargetsFile) failed(st fileStamp, err error) error {
	repeat := f.lastErr != nil && st == f.stamp
	f.stamp, f.lastErr, f.ok = st, err, false
	if !repeat {
		f.errs++
	}
	return err
}

func equalTarget(a, b Target) bool {
	if a.Address != b.Address || len(a.Labels) != len(b.Labels) {
		return false
	}
	for k, v := range a.Labels {
		if w, ok := b.Labels[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Targets returns the targets of the last good reading.
func (f *TargetsFile) Targets() []Target {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.targets)
}

// FileStatus is what the collector exports about the file.
type FileStatus struct {
	Errors   float64   // readings that failed, since the start
	LastOK   bool      // the last reading succeeded
	LoadedAt time.Time // when the targets in use were read
	Err      error     // the last reading's error, nil if it succeeded
}

// Status returns the file's counters.
func (f *TargetsFile) Status() FileStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return FileStatus{Errors: f.errs, LastOK: f.ok, LoadedAt: f.lastOK, Err: f.lastErr}
}

// LocalTarget reports whether t is this host: its host is one of the
// addresses of this host's interfaces (from addrs), or its name resolves
// to one within a second, or it is this host's name (hostname).
func LocalTarget(t Target, hostname string, addrs []netip.Addr) bool {
	host, _, err := net.SplitHostPort(t.HostPort())
	if err != nil {
		return false
	}
	if strings.EqualFold(host, hostname) {
		return true
	}
	local := func(a netip.Addr) bool { return slices.Contains(addrs, a.Unmap()) }
	if a, err := netip.ParseAddr(host); err == nil {
		return local(a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resolved, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	return err == nil && slices.ContainsFunc(resolved, local)
}

// LocalAddrs returns the addresses of this host's interfaces (loopback
// left out: a target never names it on purpose).
func LocalAddrs() []netip.Addr {
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range ifaddrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && !p.Addr().IsLoopback() {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}
