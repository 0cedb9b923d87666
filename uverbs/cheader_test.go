package uverbs

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A C layout engine for the UAPI headers whose structs have unions and
// nested aggregates (rdma_user_rxe.h, mlx5-abi.h, the work request and
// completion structs of ib_user_verbs.h), which parseCStructs leaves
// out: it lays out every struct and union with the C rules of the 64-bit
// ABIs and names each member by its path, e.g. "wr.rdma.remote_addr", with
// the members of anonymous structs and unions promoted.

// cType is a laid-out C type.
type cType struct {
	size, align int
	members     []cMember // of a struct or union
}

// cMember is a member of a struct or union.
type cMember struct {
	name     string // "" for an anonymous struct or union
	offset   int
	size     int // the whole member, arrays included; 0 when flexible
	typ      *cType
	array    bool
	flexible bool
}

// externalTypes are structs the headers use from other headers, with
// their x86_64 size and alignment: linux/in.h and linux/in6.h.
var externalTypes = map[string]*cType{
	"sockaddr_in":  {size: 16, align: 4},
	"sockaddr_in6": {size: 28, align: 4},
}

// externalConstants are macros the headers use as array lengths, from
// other headers: linux/if_ether.h.
var externalConstants = map[string]int{"ETH_ALEN": 6}

var (
	preprocessorLine = regexp.MustCompile(`(?m)^\s*#.*$`)
	cToken           = regexp.MustCompile(`[A-Za-z_]\w*|\d+|[{}\[\];,()]|\S`)
)

// cHeader is the structs and unions of one header, by tag.
type cHeader struct {
	types map[string]*cType
	errs  map[string]error // those it could not lay out, e.g. for macros
}

// parseCHeader lays out every struct and union defined at the top level of
// src. Definitions it cannot lay out (unknown types, macros) are recorded
// as errors, which layout returns.
func parseCHeader(src string) (*cHeader, error) {
	src = comments.ReplaceAllString(src, "")
	src = preprocessorLine.ReplaceAllString(src, "")
	p := &cParser{toks: cToken.FindAllString(src, -1), h: &cHeader{types: map[string]*cType{}, errs: map[string]error{}}}
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
		p.h.types[tag] = t
	}
	return p.h, nil
}

// skipBody moves past the body that starts at token start.
func (p *cParser) skipBody(start int) {
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

// layout returns the laid-out struct or union tag, or why it could not be
// laid out.
func (h *cHeader) layout(tag string) (*cType, error) {
	if t, ok := h.types[tag]; ok {
		return t, nil
	}
	if err, ok := h.errs[tag]; ok {
		return nil, err
	}
	return nil, fmt.Errorf("no struct or union %s", tag)
}

type cParser struct {
	toks []string
	i    int
	h    *cHeader
}

func (p *cParser) next() string {
	if p.i >= len(p.toks) {
		return ""
	}
	p.i++
	return p.toks[p.i-1]
}

func (p *cParser) peek() string {
	if p.i >= len(p.toks) {
		return ""
	}
	return p.toks[p.i]
}

func (p *cParser) expect(tok string) error {
	if got := p.next(); got != tok {
		return fmt.Errorf("want %q, got %q", tok, got)
	}
	return nil
}

// body parses members up to the closing brace and lays them out.
func (p *cParser) body(union bool) (*cType, error) {
	var members []cMember
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
func (p *cParser) members() ([]cMember, error) {
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
		return []cMember{{name: name, typ: typ, array: true, flexible: true}}, p.expect(";")
	}
	typ, err := p.typeSpec()
	if err != nil {
		return nil, err
	}
	if p.peek() == ";" { // an anonymous struct or union
		p.next()
		return []cMember{{typ: typ, size: typ.size}}, nil
	}
	var ms []cMember
	for {
		m := cMember{name: p.next(), typ: typ, size: typ.size}
		if p.peek() == "[" {
			p.next()
			m.array = true
			if p.peek() == "]" {
				m.flexible, m.size = true, 0
			} else {
				length := p.next()
				n, err := strconv.Atoi(length)
				if known, ok := externalConstants[length]; ok {
					n, err = known, nil
				}
				if err != nil {
					return nil, fmt.Errorf("member %s: array length: %w", m.name, err)
				}
				m.size = n * typ.size
				m.flexible = n == 0 // the old spelling of a flexible array
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
			return nil, fmt.Errorf("member %s: want , or ;", m.name)
		}
	}
}

// typeSpec parses a scalar, a struct or union by tag, or an inline struct
// or union definition.
func (p *cParser) typeSpec() (*cType, error) {
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
				p.h.types[tag] = t
			}
			return t, err
		}
		if t, ok := p.h.types[tag]; ok {
			return t, nil
		}
		if t, ok := externalTypes[tag]; ok {
			return t, nil
		}
		return nil, fmt.Errorf("unknown type %s %s", tok, tag)
	}
	if n, ok := scalarTypes[tok]; ok {
		return &cType{size: n, align: n}, nil
	}
	return nil, fmt.Errorf("unknown type %s", tok)
}

// layOutMembers places members with the C rules: in a struct each at the
// next multiple of its alignment, in a union all at 0; the size is a
// multiple of the largest alignment.
func layOutMembers(members []cMember, union bool) *cType {
	t := &cType{align: 1}
	offset := 0
	for i := range members {
		m := &members[i]
		t.align = max(t.align, m.typ.align)
		if union {
			m.offset = 0
			offset = max(offset, m.size)
			continue
		}
		offset = (offset + m.typ.align - 1) / m.typ.align * m.typ.align
		m.offset = offset
		offset += m.size
	}
	t.size = (offset + t.align - 1) / t.align * t.align
	t.members = members
	return t
}

// cPath is a member found by path.
type cPath struct {
	offset, size int
	flexible     bool
}

// paths names every member of t by its path, members of anonymous
// aggregates promoted, with offsets from the start of t.
func (t *cType) paths() map[string]cPath {
	all := map[string]cPath{}
	t.addPaths(all, "", 0)
	return all
}

func (t *cType) addPaths(all map[string]cPath, prefix string, base int) {
	for _, m := range t.members {
		offset := base + m.offset
		if m.name == "" {
			m.typ.addPaths(all, prefix, offset)
			continue
		}
		path := prefix + m.name
		all[path] = cPath{offset: offset, size: m.size, flexible: m.flexible}
		if !m.array {
			m.typ.addPaths(all, path+".", offset)
		}
	}
}

// topLevel lists the members of t that a Go struct mirrors field by
// field: its own, and those of anonymous members, in order.
func (t *cType) topLevel() []string {
	var names []string
	for _, m := range t.members {
		if m.name == "" {
			names = append(names, m.typ.topLevel()...)
		} else if !m.flexible {
			names = append(names, m.name)
		}
	}
	return names
}

// enumValues reads the values of the enumerators of a header that are
// plain numbers, or the previous value plus one.
func enumValues(src string) map[string]int {
	src = comments.ReplaceAllString(src, "")
	values := map[string]int{}
	for _, body := range regexp.MustCompile(`(?s)enum\s*\w*\s*\{(.*?)\}`).FindAllStringSubmatch(src, -1) {
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
