// Package cheader lays out the structs and unions of kernel UAPI headers
// with the C rules of the 64-bit ABIs, so that tests can check the Go
// mirrors of kernel structs (uverbs, rdmacm) field by field against
// /usr/include: it names every member by its path ("wr.rdma.remote_addr"),
// members of anonymous structs and unions promoted, and reads the values
// of plain enums.
package cheader

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Type is a laid-out C struct or union (or scalar).
type Type struct {
	Size, Align int
	Members     []Member // of a struct or union
}

// Member is a member of a struct or union.
type Member struct {
	Name     string // "" for an anonymous struct or union
	Offset   int
	Size     int // the whole member, arrays included; 0 when flexible
	Type     *Type
	Array    bool
	Flexible bool
}

// externalTypes are structs the headers use from other headers, with
// their x86_64 size and alignment: linux/in.h, linux/in6.h, linux/socket.h.
var externalTypes = map[string]*Type{
	"sockaddr_in":               {Size: 16, Align: 4},
	"sockaddr_in6":              {Size: 28, Align: 4},
	"__kernel_sockaddr_storage": {Size: 128, Align: 8},
}

// externalConstants are macros the headers use as array lengths, from
// other headers (linux/if_ether.h) or defined with #define in the header
// itself, which the parser does not read.
var externalConstants = map[string]int{"ETH_ALEN": 6, "RDMA_MAX_PRIVATE_DATA": 256}

// scalarTypes are the UAPI scalar types with their size and alignment on
// the 64-bit ABIs the kernel structs are designed for.
var scalarTypes = map[string]int{
	"__u8": 1, "__s8": 1, "__u16": 2, "__s16": 2, "__be16": 2,
	"__u32": 4, "__s32": 4, "__be32": 4,
	"__u64": 8, "__s64": 8, "__be64": 8, "__aligned_u64": 8, "__aligned_be64": 8,
}

var (
	comments         = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	preprocessorLine = regexp.MustCompile(`(?m)^\s*#.*$`)
	cToken           = regexp.MustCompile(`[A-Za-z_]\w*|\d+|[{}\[\];,()]|\S`)
	enumBody         = regexp.MustCompile(`(?s)enum\s*\w*\s*\{(.*?)\}`)
)

// Header is the structs and unions of one header (or several read as
// one), by tag.
type Header struct {
	Types map[string]*Type
	errs  map[string]error // those it could not lay out, e.g. for macros
}

// ErrNoHeader means a header file is absent (linux-libc-dev is not
// installed); it matches fs.ErrNotExist too.
var ErrNoHeader = errors.New("kernel UAPI header missing (install linux-libc-dev)")

// Read reads and parses headers joined in order (a header and the ones
// it includes) and returns them with their source text. A missing file is
// an error that matches ErrNoHeader and fs.ErrNotExist.
func Read(paths ...string) (*Header, string, error) {
	var src []byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", fmt.Errorf("%s: %w: %w", p, ErrNoHeader, err)
		}
		if err != nil {
			return nil, "", err
		}
		src = append(append(src, b...), '\n')
	}
	return Parse(string(src)), string(src), nil
}

// Parse lays out every struct and union defined at the top level of src.
// Definitions it cannot lay out (unknown types, macros) are recorded as
// errors, which Layout returns.
func Parse(src string) *Header {
	src = comments.ReplaceAllString(src, "")
	src = preprocessorLine.ReplaceAllString(src, "")
	p := &parser{toks: cToken.FindAllString(src, -1), h: &Header{Types: map[string]*Type{}, errs: map[string]error{}}}
	for p.i < len(p.toks) {
		tok := p.next()
		if (tok != "struct" && tok != "union") || p.i+1 >= len(p.toks) || p.toks[p.i+1] != "{" {
			continue
		}
		tag := p.next()
		p.next() // {
		start := p.i
		t, err := p.body(tok == "union")
		if err != nil {
			p.h.errs[tag] = fmt.Errorf("%s %s: %w", tok, tag, err)
			p.skipBody(start)
			continue
		}
		p.h.Types[tag] = t
	}
	return p.h
}

// Layout returns the laid-out struct or union tag, or why it could not be
// laid out.
func (h *Header) Layout(tag string) (*Type, error) {
	if t, ok := h.Types[tag]; ok {
		return t, nil
	}
	if err, ok := h.errs[tag]; ok {
		return nil, err
	}
	return nil, fmt.Errorf("no struct or union %s", tag)
}

type parser struct {
	toks []string
	i    int
	h    *Header
}

func (p *parser) next() string {
	if p.i >= len(p.toks) {
		return ""
	}
	p.i++
	return p.toks[p.i-1]
}

func (p *parser) peek() string {
	if p.i >= len(p.toks) {
		return ""
	}
	return p.toks[p.i]
}

func (p *parser) expect(tok string) error {
	if got := p.next(); got != tok {
		return fmt.Errorf("want %q, got %q", tok, got)
	}
	return nil
}

// skipBody moves past the body that starts at token start.
func (p *parser) skipBody(start int) {
	depth := 1
	for p.i = start; p.i < len(p.toks) && depth > 0; p.i++ {
		switch p.toks[p.i] {
		case "{":
			depth++
		case "}":
			depth--
		}
	}
}

// body parses members up to the closing brace and lays them out.
func (p *parser) body(union bool) (*Type, error) {
	var members []Member
	for p.peek() != "}" {
		if p.peek() == "" {
			return nil, fmt.Errorf("unterminated body")
		}
		m, err := p.members()
		if err != nil {
			return nil, err
		}
		members = append(members, m...)
	}
	p.next() // }
	return layOutMembers(members, union), nil
}

// members parses one declaration: a type and its declarators.
func (p *parser) members() ([]Member, error) {
	if p.peek() == "__DECLARE_FLEX_ARRAY" {
		p.next()
		if err := p.expect("("); err != nil {
			return nil, err
		}
		typ, err := p.typeSpec()
		if err != nil {
			return nil, err
		}
		if err := p.expect(","); err != nil {
			return nil, err
		}
		name := p.next()
		if err := p.expect(")"); err != nil {
			return nil, err
		}
		return []Member{{Name: name, Type: typ, Array: true, Flexible: true}}, p.expect(";")
	}
	typ, err := p.typeSpec()
	if err != nil {
		return nil, err
	}
	if p.peek() == ";" { // an anonymous struct or union
		p.next()
		return []Member{{Type: typ, Size: typ.Size}}, nil
	}
	var ms []Member
	for {
		m := Member{Name: p.next(), Type: typ, Size: typ.Size}
		if p.peek() == "[" {
			p.next()
			m.Array = true
			if p.peek() == "]" {
				m.Flexible, m.Size = true, 0
			} else {
				length := p.next()
				n, err := strconv.Atoi(length)
				if known, ok := externalConstants[length]; ok {
					n, err = known, nil
				}
				if err != nil {
					return nil, fmt.Errorf("member %s: array length: %w", m.Name, err)
				}
				m.Size = n * typ.Size
				m.Flexible = n == 0 // the old spelling of a flexible array
			}
			if err := p.expect("]"); err != nil {
				return nil, err
			}
		}
		ms = append(ms, m)
		switch p.next() {
		case ",":
			continue
		case ";":
			return ms, nil
		default:
			return nil, fmt.Errorf("member %s: want , or ;", m.Name)
		}
	}
}

// typeSpec parses a scalar, a struct or union by tag, or an inline struct
// or union definition.
func (p *parser) typeSpec() (*Type, error) {
	tok := p.next()
	if tok == "struct" || tok == "union" {
		if p.peek() == "{" {
			p.next()
			return p.body(tok == "union")
		}
		tag := p.next()
		if p.peek() == "{" {
			p.next()
			t, err := p.body(tok == "union")
			if err == nil {
				p.h.Types[tag] = t
			}
			return t, err
		}
		if t, ok := p.h.Types[tag]; ok {
			return t, nil
		}
		if t, ok := externalTypes[tag]; ok {
			return t, nil
		}
		return nil, fmt.Errorf("unknown type %s %s", tok, tag)
	}
	if n, ok := scalarTypes[tok]; ok {
		return &Type{Size: n, Align: n}, nil
	}
	return nil, fmt.Errorf("unknown type %s", tok)
}

// layOutMembers places members with the C rules: in a struct each at the
// next multiple of its alignment, in a union all at 0; the size is a
// multiple of the largest alignment.
func layOutMembers(members []Member, union bool) *Type {
	t := &Type{Align: 1}
	offset := 0
	for i := range members {
		m := &members[i]
		t.Align = max(t.Align, m.Type.Align)
		if union {
			m.Offset = 0
			offset = max(offset, m.Size)
			continue
		}
		offset = (offset + m.Type.Align - 1) / m.Type.Align * m.Type.Align
		m.Offset = offset
		offset += m.Size
	}
	t.Size = (offset + t.Align - 1) / t.Align * t.Align
	t.Members = members
	return t
}

// Path is a member found by path.
type Path struct {
	Offset, Size int
	Flexible     bool
}

// Paths names every member of t by its path, members of anonymous
// aggregates promoted, with offsets from the start of t.
func (t *Type) Paths() map[string]Path {
	all := map[string]Path{}
	t.addPaths(all, "", 0)
	return all
}

func (t *Type) addPaths(all map[string]Path, prefix string, base int) {
	for _, m := range t.Members {
		offset := base + m.Offset
		if m.Name == "" {
			m.Type.addPaths(all, prefix, offset)
			continue
		}
		path := prefix + m.Name
		all[path] = Path{Offset: offset, Size: m.Size, Flexible: m.Flexible}
		if !m.Array {
			m.Type.addPaths(all, path+".", offset)
		}
	}
}

// TopLevel lists the members of t that a Go struct mirrors field by
// field: its own, and those of anonymous members, in order.
func (t *Type) TopLevel() []string {
	var names []string
	for _, m := range t.Members {
		if m.Name == "" {
			names = append(names, m.Type.TopLevel()...)
		} else if !m.Flexible {
			names = append(names, m.Name)
		}
	}
	return names
}

// EnumValues reads the values of the enumerators of a header that are
// plain numbers, or the previous value plus one.
func EnumValues(src string) map[string]int {
	src = comments.ReplaceAllString(src, "")
	values := map[string]int{}
	for _, body := range enumBody.FindAllStringSubmatch(src, -1) {
		next := 0
		for _, item := range strings.Split(body[1], ",") {
			name, value, hasValue := strings.Cut(strings.TrimSpace(item), "=")
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			if hasValue {
				v, err := strconv.ParseInt(strings.TrimSpace(value), 0, 64)
				if err != nil {
					if prev, ok := values[strings.TrimSpace(value)]; ok {
						v = int64(prev)
					} else {
						next = -1 << 30 // unknown from here on
						continue
					}
				}
				next = int(v)
			}
			if next >= 0 {
				values[name] = next
			}
			next++
		}
	}
	return values
}

// Field is a field of a Go struct in its encoding/binary form.
type Field struct {
	Name         string
	Offset, Size int
}

// Fields lists the fields of a struct with their offsets in its
// encoding/binary form, which is what is written to the kernel.
func Fields(v any) []Field {
	t := reflect.TypeOf(v)
	var fields []Field
	offset := 0
	for i := range t.NumField() {
		size := binary.Size(reflect.Zero(t.Field(i).Type).Interface())
		fields = append(fields, Field{Name: t.Field(i).Name, Offset: offset, Size: size})
		offset += size
	}
	return fields
}

// Normalize makes a Go field name and a C member name comparable:
// lower case without underscores ("QPNum" and "qp_num" are both "qpnum").
func Normalize(name string) string {
	return strings.ToLower(strings.ReplaceAll(name, "_", ""))
}

// Compare checks that the Go struct goValue encodes to exactly the layout
// of c: the same size, every Go field at its C member's offset with its
// size, and no padding in the Go struct (so that its memory layout is its
// encoding). members maps a Go field to the path of its C member where
// the names differ or the member is inside a union; "" marks a Go field
// that covers the rest of a union. It returns the differences, none when
// the layouts agree.
func Compare(goValue any, c *Type, members map[string]string) []string {
	var diffs []string
	if got := binary.Size(goValue); got != c.Size {
		diffs = append(diffs, fmt.Sprintf("size %d, C %d", got, c.Size))
	}
	if mem := reflect.TypeOf(goValue).Size(); int(mem) != binary.Size(goValue) {
		diffs = append(diffs, fmt.Sprintf("Go struct has padding: %d bytes in memory, %d encoded", mem, binary.Size(goValue)))
	}
	paths := c.Paths()
	byName := map[string]string{}
	for _, name := range c.TopLevel() {
		byName[Normalize(name)] = name
	}
	for _, g := range Fields(goValue) {
		path, mapped := members[g.Name]
		if !mapped {
			path = byName[Normalize(g.Name)]
		}
		if mapped && path == "" {
			if g.Offset+g.Size > c.Size {
				diffs = append(diffs, fmt.Sprintf("field %s @%d size %d runs past the C struct's %d bytes", g.Name, g.Offset, g.Size, c.Size))
			}
			continue
		}
		m, ok := paths[path]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("field %s: no C member %q", g.Name, path))
			continue
		}
		if g.Offset != m.Offset || g.Size != m.Size {
			diffs = append(diffs, fmt.Sprintf("field %s @%d size %d, C %s @%d size %d", g.Name, g.Offset, g.Size, path, m.Offset, m.Size))
		}
	}
	return diffs
}

// Missing ends a test that cannot read its headers (err from Read): a
// skip naming the package where the machine lacks them (make test
// installs nothing), a failure where CI requires them
// (GRDMA_UAPI_HEADERS=required, which .ci/run sets after installing
// them) or for any other error.
func Missing(tb testing.TB, pkg string, err error) {
	tb.Helper()
	if errors.Is(err, fs.ErrNotExist) && os.Getenv("GRDMA_UAPI_HEADERS") != "required" {
		tb.Skipf("%s: kernel UAPI header missing (%v): the ABI layouts are not checked; install linux-libc-dev to check them", pkg, err)
	}
	tb.Fatalf("%s: no kernel UAPI header to check against: %v (install linux-libc-dev)", pkg, err)
}
