package uverbs

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

// ibUserVerbsHeader is the kernel UAPI header the structs mirror
// (linux-libc-dev, or rdma-core's kernel-headers).
const ibUserVerbsHeader = "/usr/include/rdma/ib_user_verbs.h"

// layouts pairs every Go ABI struct with its C struct.
var layouts = []struct {
	goValue any
	cName   string
}{
	{cmdHdr{}, "ib_uverbs_cmd_hdr"},
	{getContextReq{}, "ib_uverbs_get_context"},
	{getContextResp{}, "ib_uverbs_get_context_resp"},
	{queryDeviceReq{}, "ib_uverbs_query_device"},
	{DeviceAttr{}, "ib_uverbs_query_device_resp"},
	{queryPortReq{}, "ib_uverbs_query_port"},
	{PortAttr{}, "ib_uverbs_query_port_resp"},
}

// TestLayoutMatchesHeader checks that each Go struct encodes to exactly the
// C struct's layout: same size, and the same fields at the same offsets
// with the same sizes, in order. Flexible driver_data[] members take no
// room in the struct and have no Go field.
func TestLayoutMatchesHeader(t *testing.T) {
	src, err := os.ReadFile(ibUserVerbsHeader)
	if err != nil {
		noHeader(t, err)
	}
	structs, err := parseCStructs(string(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layouts {
		t.Run(l.cName, func(t *testing.T) {
			c, ok := structs[l.cName]
			if !ok {
				t.Fatalf("struct %s not in %s", l.cName, ibUserVerbsHeader)
			}
			goFields := encodedFields(l.goValue)
			var cFields []cField
			for _, f := range c.fields {
				if !f.flexible {
					cFields = append(cFields, f)
				}
			}
			if got := binary.Size(l.goValue); got != c.size {
				t.Errorf("size %d, C %d", got, c.size)
			}
			if len(goFields) != len(cFields) {
				t.Fatalf("%d fields, C has %d: %v vs %v", len(goFields), len(cFields), goFields, cFields)
			}
			for i, g := range goFields {
				cf := cFields[i]
				if normalize(g.name) != normalize(cf.name) || g.offset != cf.offset || g.size != cf.size {
					t.Errorf("field %d: Go %s @%d size %d, C %s @%d size %d",
						i, g.name, g.offset, g.size, cf.name, cf.offset, cf.size)
				}
			}
		})
	}
}

func normalize(name string) string {
	return strings.ToLower(strings.ReplaceAll(name, "_", ""))
}

type cField struct {
	name         string
	offset, size int
	flexible     bool // a flexible array member: name[]
}

func (f cField) String() string { return fmt.Sprintf("%s@%d/%d", f.name, f.offset, f.size) }

// encodedFields lists the fields of a struct with their offsets in its
// encoding/binary form, which is what is written to the kernel.
func encodedFields(v any) []cField {
	t := reflect.TypeOf(v)
	var fields []cField
	offset := 0
	for i := range t.NumField() {
		size := binary.Size(reflect.Zero(t.Field(i).Type).Interface())
		fields = append(fields, cField{name: t.Field(i).Name, offset: offset, size: size})
		offset += size
	}
	return fields
}

type cStruct struct {
	size   int
	align  int
	fields []cField
}

var (
	comments    = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	structStart = regexp.MustCompile(`\bstruct\s+(\w+)\s*\{`)
	fieldDecl   = regexp.MustCompile(`^(struct\s+\w+|\w+)\s+(\w+)\s*(?:\[\s*(\w*)\s*\])?$`)
)

// scalarTypes are the UAPI scalar types with their size and alignment on
// the 64-bit ABIs the kernel structs are designed for.
var scalarTypes = map[string]int{
	"__u8": 1, "__s8": 1, "__u16": 2, "__s16": 2, "__be16": 2,
	"__u32": 4, "__s32": 4, "__be32": 4,
	"__u64": 8, "__s64": 8, "__be64": 8, "__aligned_u64": 8, "__aligned_be64": 8,
}

// parseCStructs lays out the C structs of a UAPI header with the C rules:
// each field at the next multiple of its alignment, the struct's size a
// multiple of its largest alignment. Structs with nested anonymous structs
// or unions, or with types it does not know, are left out.
func parseCStructs(src string) (map[string]cStruct, error) {
	src = comments.ReplaceAllString(src, "")
	structs := map[string]cStruct{}
	for _, m := range structStart.FindAllStringSubmatchIndex(src, -1) {
		name := src[m[2]:m[3]]
		body, ok := braceBody(src[m[1]:])
		if !ok {
			return nil, fmt.Errorf("struct %s: unbalanced braces", name)
		}
		if s, ok := layOut(body, structs); ok {
			structs[name] = s
		}
	}
	return structs, nil
}

func braceBody(s string) (string, bool) {
	depth := 1
	for i, r := range s {
		switch r {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return s[:i], true
			}
		}
	}
	return "", false
}

func layOut(body string, known map[string]cStruct) (cStruct, bool) {
	if strings.Contains(body, "{") {
		return cStruct{}, false
	}
	s := cStruct{align: 1}
	offset := 0
	for _, decl := range strings.Split(body, ";") {
		decl = strings.Join(strings.Fields(decl), " ")
		if decl == "" {
			continue
		}
		m := fieldDecl.FindStringSubmatch(decl)
		if m == nil {
			return cStruct{}, false
		}
		size, align := 0, 0
		if inner, ok := strings.CutPrefix(m[1], "struct "); ok {
			k, ok := known[inner]
			if !ok {
				return cStruct{}, false
			}
			size, align = k.size, k.align
		} else if n, ok := scalarTypes[m[1]]; ok {
			size, align = n, n
		} else {
			return cStruct{}, false
		}
		f := cField{name: m[2]}
		if strings.Contains(decl, "[") {
			if m[3] == "" {
				f.flexible = true
				size = 0
			} else {
				n, err := strconv.Atoi(m[3])
				if err != nil {
					return cStruct{}, false
				}
				size *= n
			}
		}
		offset = (offset + align - 1) / align * align
		f.offset, f.size = offset, size
		offset += size
		s.align = max(s.align, align)
		s.fields = append(s.fields, f)
	}
	s.size = (offset + s.align - 1) / s.align * s.align
	return s, true
}

// TestHeaderParser checks the parser itself on layouts known by heart, so
// that a parser bug cannot make TestLayoutMatchesHeader pass.
func TestHeaderParser(t *testing.T) {
	structs, err := parseCStructs(`
struct a { __u8 x; __aligned_u64 y; };          /* padded to 8 */
struct b { __u32 x; __u16 y[3]; __aligned_u64 d[]; };
struct c { struct a inner; __u8 z; };
struct d { struct { __u32 n; } anon; };
`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"a": "16 [x@0/1 y@8/8]",
		"b": "16 [x@0/4 y@4/6 d@16/0]",
		"c": "24 [inner@0/16 z@16/1]",
	}
	for name, w := range want {
		s := structs[name]
		if got := fmt.Sprintf("%d %v", s.size, s.fields); got != w {
			t.Errorf("struct %s = %s, want %s", name, got, w)
		}
	}
	if _, ok := structs["d"]; ok {
		t.Error("a struct with an anonymous member was laid out; want it left out")
	}
}

// noHeader skips a test that needs a kernel UAPI header the machine lacks
// (make test installs nothing), or fails it where CI requires the headers
// (GRDMA_UAPI_HEADERS=required, set by .ci/run after installing them).
func noHeader(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, fs.ErrNotExist) && os.Getenv("GRDMA_UAPI_HEADERS") != "required" {
		t.Skipf("uverbs: kernel UAPI header missing (%v): the ABI struct layouts are not checked; install linux-libc-dev to check them", err)
	}
	t.Fatalf("uverbs: no kernel UAPI header to check against: %v (install linux-libc-dev)", err)
}
