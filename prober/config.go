package prober

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/grdma/grdma/verbsprobe"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v2"
)

// Config is the modules file (`grdma exporter --probe.config.file`): a
// module per name, as blackbox_exporter's.
//
//	modules:
//	  rc_lat_4k:
//	    prober: rc
//	    timeout: 5s
//	    rc: {test: lat, op: send, size: 4096, iters: 2000}
type Config struct {
	Modules map[string]Module `yaml:"modules"`
}

// Module is what one probe does.
type Module struct {
	// Prober is rc, ud_ping or cm_connect.
	Prober string `yaml:"prober"`
	// Timeout bounds the probe; Prometheus' scrape timeout (less the
	// offset) bounds it too, and the smaller wins (DefaultTimeout).
	Timeout model.Duration `yaml:"timeout,omitempty"`
	// Source is the local RDMA port probes leave from; by default the
	// port whose RoCE GID is the address the route to the target leaves
	// from, or the only ACTIVE port.
	Source Source `yaml:"source,omitempty"`

	RC     RCModule     `yaml:"rc,omitempty"`
	UDPing UDPingModule `yaml:"ud_ping,omitempty"`

	builtin bool // from DefaultConfig, not a file
}

// Source names a local RDMA port.
type Source struct {
	Device string `yaml:"device,omitempty"`
	Port   uint32 `yaml:"port,omitempty"`
	// GIDIndex is the source GID; nil chooses one (verbsprobe.AutoGID).
	GIDIndex *int `yaml:"gid_index,omitempty"`
}

// RCModule is a test over a reliable connected queue pair against the
// target's responder (`grdma probe DEV serve`), run by verbsprobe.
type RCModule struct {
	// Test is connect, traffic, lat or bw; Op write, send or read (lat,
	// bw); zero Size and Iters take verbsprobe's defaults (perftest's).
	Test     verbsprobe.TestKind  `yaml:"test"`
	Op       verbsprobe.Operation `yaml:"op,omitempty"`
	Size     int                  `yaml:"size,omitempty"`
	Iters    int                  `yaml:"iters,omitempty"`
	Duration model.Duration       `yaml:"duration,omitempty"`
	// TargetPort is the responder's TCP port when the target names none
	// (verbsprobe.DefaultPeerPort).
	TargetPort int `yaml:"target_port,omitempty"`
	// KeyFile is the responder's shared secret, for responders started
	// with auth FILE (verbsprobe.LoadKey: chmod 600).
	KeyFile string `yaml:"key_file,omitempty"`
	// MaxSize bounds the size a request may ask for with the size
	// parameter (DefaultMaxSize).
	MaxSize int `yaml:"max_size,omitempty"`
	// Via is how the responder is reached: tcp (grdma's exchange, the
	// default) or cm (the RDMA CM, verbsprobe.TransportCM: the target
	// must resolve to an IP address, and the CM chooses the local port
	// unless source names one; no key_file: a responder with auth refuses
	// CM peers).
	Via string `yaml:"via,omitempty"`

	key []byte
}

// UDPingModule sends Count UD pings to the target's responder, Interval
// apart, cycling through Sizes (0: the path MTU).
type UDPingModule struct {
	Count      int            `yaml:"count,omitempty"`
	Interval   model.Duration `yaml:"interval,omitempty"`
	Sizes      []int          `yaml:"sizes,omitempty"`
	TargetPort int            `yaml:"target_port,omitempty"`
}

// Probers.
const (
	ProberRC     = "rc"
	ProberUDPing = "ud_ping"
)

// Ways an rc module reaches its responder (RCModule.Via).
const (
	ViaTCP = "tcp"
	ViaCM  = "cm"
)

// Defaults.
const (
	// DefaultTimeout is a module's timeout when it gives none: Prometheus'
	// default scrape timeout.
	DefaultTimeout = 10 * time.Second
	// MaxTimeout bounds any probe, whatever the module and the scrape say.
	MaxTimeout = 5 * time.Minute
	// DefaultMaxSize is what a request's size may ask for: the
	// responder's own default limit.
	DefaultMaxSize = verbsprobe.DefaultMaxSize
	// DefaultUDPingCount and DefaultUDPingInterval: ten pings 100 ms
	// apart, a second in all.
	DefaultUDPingCount    = 10
	DefaultUDPingInterval = 100 * time.Millisecond
	maxUDPingCount        = 10_000
)

// DefaultConfig is the modules built in, used without a modules file and
// under those a file defines (a file's module of the same name wins):
// rc_lat and rc_bw (perftest's lat and bw write against the responder,
// bw for 2 s so that it fits Prometheus' default 10 s scrape timeout),
// rc_connect (the control path to RTS, no data), cm_connect (the same
// connection made by the RDMA CM, as rdma_cm applications make theirs),
// and ud_ping when the exporter has a UD prober.
func DefaultConfig() *Config {
	return &Config{Modules: map[string]Module{
		"rc_lat":     {Prober: ProberRC, RC: RCModule{Test: verbsprobe.TestLatency, Op: verbsprobe.OpWrite}, builtin: true},
		"rc_bw":      {Prober: ProberRC, RC: RCModule{Test: verbsprobe.TestBandwidth, Op: verbsprobe.OpWrite, Duration: model.Duration(2 * time.Second)}, builtin: true},
		"rc_connect": {Prober: ProberRC, RC: RCModule{Test: verbsprobe.TestConnect}, builtin: true},
		"cm_connect": {Prober: ProberRC, RC: RCModule{Test: verbsprobe.TestConnect, Via: ViaCM}, builtin: true},
		"ud_ping":    {Prober: ProberUDPing, builtin: true},
	}}
}

// LoadConfig reads a modules file: its modules over the built-in ones.
// Unknown fields, probers and parameters are refused, key files read.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(path, data)
}

// ParseConfig is LoadConfig of data read from path.
func ParseConfig(path string, data []byte) (*Config, error) {
	var file Config
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c := DefaultConfig()
	for name, m := range file.Modules {
		c.Modules[name] = m
	}
	if err := c.prepare(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// prepare validates every module and loads its key.
func (c *Config) prepare() error {
	for _, name := range slices.Sorted(maps.Keys(c.Modules)) {
		m := c.Modules[name]
		if err := m.prepare(); err != nil {
			return fmt.Errorf("module %s: %w", name, err)
		}
		c.Modules[name] = m
	}
	return nil
}

func (m *Module) prepare() error {
	if m.Timeout < 0 || time.Duration(m.Timeout) > MaxTimeout {
		return fmt.Errorf("timeout %v: at most %v", m.Timeout, MaxTimeout)
	}
	switch m.Prober {
	case ProberRC:
		r := &m.RC
		if r.Test == "" {
			return fmt.Errorf("rc needs a test: connect, traffic, lat or bw")
		}
		if r.Test == verbsprobe.TestPingpong {
			return fmt.Errorf("rc test pingpong talks to ibv_rc_pingpong, not to a responder: use lat")
		}
		if err := r.test(nil).Validate(); err != nil {
			return err
		}
		if r.MaxSize < 0 || r.MaxSize > verbsprobe.MaxTestSize {
			return fmt.Errorf("max_size %d: at most %d", r.MaxSize, verbsprobe.MaxTestSize)
		}
		if r.TargetPort < 0 || r.TargetPort > 65535 {
			return fmt.Errorf("target_port %d is not a port", r.TargetPort)
		}
		switch r.Via {
		case "", ViaTCP:
		case ViaCM:
			if r.KeyFile != "" {
				return fmt.Errorf("rc via cm takes no key_file: a responder with auth refuses RDMA CM peers (the CM's request cannot carry its challenge); use via tcp")
			}
		default:
			return fmt.Errorf("rc via %q: tcp or cm", r.Via)
		}
		if r.KeyFile != "" {
			key, err := verbsprobe.LoadKey(r.KeyFile)
			if err != nil {
				return err
			}
			r.key = key
		}
	case ProberUDPing:
		u := m.UDPing
		if u.Count < 0 || u.Count > maxUDPingCount {
			return fmt.Errorf("ud_ping count %d: at most %d", u.Count, maxUDPingCount)
		}
		if u.Interval < 0 {
			return fmt.Errorf("ud_ping interval %v: not negative", u.Interval)
		}
		for _, s := range u.Sizes {
			if s < 0 || s > 1<<16 {
				return fmt.Errorf("ud_ping size %d: 1 to 65536 bytes, or 0 for the path MTU", s)
			}
		}
		if u.TargetPort < 0 || u.TargetPort > 65535 {
			return fmt.Errorf("target_port %d is not a port", u.TargetPort)
		}
	case "":
		return fmt.Errorf("no prober: rc or ud_ping")
	default:
		return fmt.Errorf("unknown prober %q: rc or ud_ping", m.Prober)
	}
	return nil
}

// timeout is the module's own timeout.
func (m Module) timeout() time.Duration {
	if m.Timeout > 0 {
		return time.Duration(m.Timeout)
	}
	return DefaultTimeout
}

// test is the verbsprobe test the module runs, with a request's
// parameters over the module's (nil: none).
func (r RCModule) test(p *Params) verbsprobe.Test {
	t := verbsprobe.Test{Kind: r.Test, Op: r.Op, Size: r.Size, Iters: r.Iters, Duration: time.Duration(r.Duration)}
	if p != nil {
		if p.Op != "" {
			t.Op = p.Op
		}
		if p.Size > 0 {
			t.Size = p.Size
		}
		if p.Iters > 0 {
			t.Iters, t.Duration = p.Iters, 0
		}
		if p.Duration > 0 {
			t.Duration, t.Iters = p.Duration, 0
		}
	}
	return t.WithDefaults()
}

func (r RCModule) maxSize() int {
	if r.MaxSize > 0 {
		return r.MaxSize
	}
	return DefaultMaxSize
}

// String is the module as YAML, for the debug output; the key file's
// name is shown, never the key.
func (m Module) String() string {
	var b bytes.Buffer
	out, err := yaml.Marshal(m)
	if err != nil {
		return err.Error()
	}
	b.Write(out)
	return strings.TrimRight(b.String(), "\n")
}
