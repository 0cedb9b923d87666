package sweep

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
)

// MaxHosts bounds a host list: Slurm's own hostlist refuses a range of
// more than 64K hosts, and a sweep of more would take days.
const MaxHosts = 1 << 16

// maxHostLine bounds one line of a host file.
const maxHostLine = 1 << 20

// ExpandHostlist expands a host list as Slurm writes one
// (SLURM_JOB_NODELIST, scontrol show hostnames): hosts separated by
// commas, spaces or tabs, each a name with bracketed numeric ranges,
// e.g. "node[01-04,07],gpu-[1-3]" is node01 node02 node03 node04 node07
// gpu-1 gpu-2 gpu-3. As Slurm does:
//
//   - a range keeps the width of its lower bound: [08-10] is 08 09 10,
//     [8-10] is 8 9 10, [001-3] is 001 002 003;
//   - several bracket groups in one name multiply, the leftmost varying
//     slowest: rack[1-2]-n[1-2] is rack1-n1 rack1-n2 rack2-n1 rack2-n2;
//   - text may follow the last group: n[1-2]-ib is n1-ib n2-ib;
//   - commas inside brackets separate ranges, not hosts.
//
// Unlike Slurm, which keeps a malformed name as it is, an unbalanced or
// nested bracket, an empty or reversed range, a negative number or
// Slurm's 3-D box syntax (123x456) is an error naming the expression;
// so is a list of more than MaxHosts hosts. Duplicates are kept (Hosts
// refuses them).
func ExpandHostlist(expr string) ([]string, error) {
	var out []string
	for _, tok := range splitHostlist(expr) {
		if tok.err != nil {
			return nil, tok.err
		}
		hosts, err := expandName(tok.text, MaxHosts-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, hosts...)
	}
	return out, nil
}

type hostToken struct {
	text string
	err  error
}

// splitHostlist splits at commas, spaces and tabs outside brackets.
func splitHostlist(expr string) []hostToken {
	var toks []hostToken
	depth, start := 0, 0
	flush := func(end int) {
		if end > start {
			toks = append(toks, hostToken{text: expr[start:end]})
		}
	}
	for i := 0; i < len(expr); i++ {
		switch c := expr[i]; c {
		case '[':
			depth++
			if depth > 1 {
				return append(toks, hostToken{err: fmt.Errorf("host list %q: brackets do not nest", expr)})
			}
		case ']':
			depth--
			if depth < 0 {
				return append(toks, hostToken{err: fmt.Errorf("host list %q: ']' without '['", expr)})
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				flush(i)
				start = i + 1
			} else if c != ',' {
				return append(toks, hostToken{err: fmt.Errorf("host list %q: space inside brackets", expr)})
			}
		}
	}
	if depth != 0 {
		return append(toks, hostToken{err: fmt.Errorf("host list %q: '[' without ']'", expr)})
	}
	flush(len(expr))
	return toks
}

// numRange is lo-hi printed with width digits.
type numRange struct {
	lo, hi uint64
	width  int
}

// expandName expands one name with bracket groups into at most limit
// hosts.
func expandName(name string, limit int) ([]string, error) {
	i := strings.IndexByte(name, '[')
	if i < 0 {
		return []string{name}, nil
	}
	j := strings.IndexByte(name[i:], ']') + i
	ranges, err := parseRanges(name, name[i+1:j])
	if err != nil {
		return nil, err
	}
	prefix, rest := name[:i], name[j+1:]
	tails, err := expandName(rest, limit)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range ranges {
		for n := r.lo; n <= r.hi; n++ {
			if len(out)+len(tails) > limit {
				return nil, fmt.Errorf("host list expression %q: more than %d hosts", name, MaxHosts)
			}
			num := fmt.Sprintf("%0*d", r.width, n)
			for _, t := range tails {
				out = append(out, prefix+num+t)
			}
		}
	}
	return out, nil
}

// parseRanges reads the inside of one bracket group: "01-04,07".
func parseRanges(name, list string) ([]numRange, error) {
	if list == "" {
		return nil, fmt.Errorf("host list expression %q: empty brackets", name)
	}
	var out []numRange
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		bad := func(why string) error {
			return fmt.Errorf("host list expression %q: range %q %s", name, part, why)
		}
		if strings.ContainsRune(part, 'x') {
			return nil, bad("is a 3-D box (not supported: list the hosts)")
		}
		if !isDigits(lo) || (isRange && !isDigits(hi)) {
			return nil, bad("is not N or N-M with decimal numbers")
		}
		if !isRange {
			hi = lo
		}
		l, err1 := strconv.ParseUint(lo, 10, 64)
		h, err2 := strconv.ParseUint(hi, 10, 64)
		switch {
		case err1 != nil || err2 != nil:
			return nil, bad("is out of range")
		case l > h:
			return nil, bad("goes down")
		case h-l >= MaxHosts:
			return nil, bad(fmt.Sprintf("has more than %d hosts", MaxHosts))
		}
		out = append(out, numRange{lo: l, hi: h, width: len(lo)})
	}
	return out, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Host is one node of a sweep as the host list names it: a host name or
// address and, when the list gives one, the TCP port its sweep listens on
// (0: the sweep's port).
type Host struct {
	Name string
	Port int
}

// String is the host as the list writes it: "node01", "10.0.0.1:18600",
// "[fe80::1%eth0]:18600".
func (h Host) String() string {
	if h.Port == 0 {
		return h.Name
	}
	return net.JoinHostPort(h.Name, strconv.Itoa(h.Port))
}

// Addr is host:port, with port when the host has none.
func (h Host) Addr(port int) string {
	if h.Port != 0 {
		port = h.Port
	}
	return net.JoinHostPort(h.Name, strconv.Itoa(port))
}

// ParseHost reads "NAME", "NAME:PORT", "[IPv6]" or "[IPv6]:PORT"; NAME is
// a host name (letters, digits, '-', '_', '.') or an IP address.
func ParseHost(s string) (Host, error) {
	name, port := s, 0
	if strings.HasPrefix(s, "[") {
		if end := strings.IndexByte(s, ']'); end > 0 && (end == len(s)-1 || s[end+1] == ':') {
			name = s[1:end]
			if end < len(s)-1 {
				p, err := parsePort(s[end+2:])
				if err != nil {
					return Host{}, fmt.Errorf("host %q: %v", s, err)
				}
				port = p
			}
			if net.ParseIP(strings.SplitN(name, "%", 2)[0]) == nil {
				return Host{}, fmt.Errorf("host %q: %q in brackets is not an IPv6 address", s, name)
			}
			return Host{Name: name, Port: port}, nil
		}
		return Host{}, fmt.Errorf("host %q: bad brackets (an IPv6 address is written [ADDR] or [ADDR]:PORT)", s)
	}
	if strings.Count(s, ":") == 1 {
		var p string
		name, p, _ = strings.Cut(s, ":")
		v, err := parsePort(p)
		if err != nil {
			return Host{}, fmt.Errorf("host %q: %v", s, err)
		}
		port = v
	} else if strings.Count(s, ":") > 1 {
		if net.ParseIP(s) == nil {
			return Host{}, fmt.Errorf("host %q: not an IPv6 address (write [ADDR]:PORT for a port)", s)
		}
		return Host{Name: s}, nil
	}
	if err := checkHostName(name); err != nil {
		return Host{}, fmt.Errorf("host %q: %v", s, err)
	}
	return Host{Name: name, Port: port}, nil
}

func parsePort(p string) (int, error) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q is not 1-65535", p)
	}
	return n, nil
}

// checkHostName accepts DNS names (RFC 1123 labels, '_' too, as cluster
// naming schemes use it) and IPv4 addresses.
func checkHostName(name string) error {
	if name == "" {
		return errors.New("empty name")
	}
	if len(name) > 253 {
		return errors.New("longer than 253 characters")
	}
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		if label == "" || len(label) > 63 {
			return errors.New("a label between dots is empty or longer than 63 characters")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' ||
				c == '-' && i > 0 && i < len(label)-1
			if !ok {
				return fmt.Errorf("character %q is not allowed in a host name", c)
			}
		}
	}
	return nil
}

// Hosts parses a host list: each entry a host (ParseHost), possibly a
// Slurm bracket expression (ExpandHostlist: "node[01-08]",
// "node[1-4]:18600"). A duplicate (the same name and port twice) is an
// error naming both positions.
func Hosts(entries []string) ([]Host, error) {
	var hosts []Host
	seen := map[Host]int{}
	for _, e := range entries {
		expanded, err := ExpandHostlist(e)
		if isIPv6Literal(e) {
			expanded, err = []string{e}, nil
		}
		if err != nil {
			return nil, err
		}
		for _, s := range expanded {
			h, err := ParseHost(s)
			if err != nil {
				return nil, err
			}
			key := Host{Name: strings.ToLower(h.Name), Port: h.Port}
			if first, dup := seen[key]; dup {
				return nil, fmt.Errorf("host %s is listed twice (positions %d and %d): each node once", h, first, len(hosts))
			}
			seen[key] = len(hosts)
			hosts = append(hosts, h)
			if len(hosts) > MaxHosts {
				return nil, fmt.Errorf("more than %d hosts", MaxHosts)
			}
		}
	}
	return hosts, nil
}

// isIPv6Literal reports whether an entry is "[IPv6]" or "[IPv6]:PORT",
// not a bracket expression.
func isIPv6Literal(e string) bool {
	end := strings.IndexByte(e, ']')
	return strings.HasPrefix(e, "[") && end > 0 && strings.Contains(e[:end], ":")
}

// ReadHosts reads a host file: hosts (or Slurm host list expressions)
// separated by white space or commas, '#' to the end of a line a comment.
// An empty list is an error: a sweep needs at least two nodes.
func ReadHosts(r io.Reader) ([]Host, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxHostLine)
	var entries []string
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		toks := splitHostlist(text)
		for _, t := range toks {
			if t.err != nil {
				return nil, fmt.Errorf("line %d: %v", line, t.err)
			}
			entries = append(entries, t.text)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the host list: %w", err)
	}
	hosts, err := Hosts(entries)
	if err != nil {
		return nil, err
	}
	if len(hosts) < 2 {
		return nil, fmt.Errorf("the host list has %d host(s): a sweep needs at least two", len(hosts))
	}
	return hosts, nil
}
