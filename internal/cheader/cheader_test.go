package cheader

import (
	"errors"
	"io/fs"
	"testing"
)

// TestParser checks the layout engine on layouts known by heart, so that
// an engine bug cannot make the layout tests of its users pass.
func TestParser(t *testing.T) {
	h := Parse(`
struct macro { RDMA_UAPI_PTR(void *, p); };
#define X 1
struct in { __u8 a; __aligned_u64 b; };                       /* 16 */
union u { __u32 w; struct { __u8 lo; __u16 hi; } parts; };    /* 4 */
struct s {
	__u32 x;
	union { __be32 imm; __u32 rkey; } ex;
	union {
		struct { __aligned_u64 addr; __u32 key; } rdma;
		struct { __u16 p[10]; } big;
	} wr;
	struct in inner;
	union { __u64 q; __u8 c; };
	__u16 pair[2], single;
	union { __DECLARE_FLEX_ARRAY(__u8, raw); __DECLARE_FLEX_ARRAY(struct in, ins); };
};
struct f { __u32 n; __aligned_u64 d[0]; };
struct bad { struct nosuch x; };
struct ext { __u16 n; struct __kernel_sockaddr_storage ss; __u8 pd[RDMA_MAX_PRIVATE_DATA]; };
`)
	want := map[string]struct{ size, align int }{"in": {16, 8}, "u": {4, 4}, "s": {64, 8}, "f": {8, 8}, "ext": {392, 8}}
	for name, w := range want {
		if c := h.Types[name]; c == nil || c.Size != w.size || c.Align != w.align {
			t.Errorf("%s = %+v, want size %d align %d", name, c, w.size, w.align)
		}
	}
	paths := h.Types["s"].Paths()
	for path, w := range map[string]Path{
		"x": {0, 4, false}, "ex": {4, 4, false}, "ex.rkey": {4, 4, false}, "wr": {8, 24, false},
		"wr.rdma.addr": {8, 8, false}, "wr.rdma.key": {16, 4, false}, "wr.big.p": {8, 20, false},
		"inner": {32, 16, false}, "inner.b": {40, 8, false}, "q": {48, 8, false}, "c": {48, 1, false},
		"pair": {56, 4, false}, "single": {60, 2, false}, "raw": {64, 0, true}, "ins": {64, 0, true},
	} {
		if got, ok := paths[path]; !ok || got != w {
			t.Errorf("s.%s = %+v (found %v), want %+v", path, got, ok, w)
		}
	}
	if got := h.Types["s"].TopLevel(); len(got) != 8 || got[4] != "q" || got[5] != "c" {
		t.Errorf("top-level members %v", got)
	}
	if f := h.Types["f"].Paths()["d"]; !f.Flexible || f.Offset != 8 {
		t.Errorf("f.d = %+v, want flexible at 8", f)
	}
	if p := h.Types["ext"].Paths(); p["ss"].Offset != 8 || p["pd"].Offset != 136 || p["pd"].Size != 256 {
		t.Errorf("ext = %+v", p)
	}
	for _, tag := range []string{"macro", "bad", "missing"} {
		if _, err := h.Layout(tag); err == nil {
			t.Errorf("struct %s was laid out; want an error", tag)
		}
	}
	values := EnumValues("enum e { A, B, C = 10, D, E = (1 << 2), F };")
	if values["A"] != 0 || values["B"] != 1 || values["D"] != 11 {
		t.Errorf("enum values %v", values)
	}
	if _, ok := values["F"]; ok {
		t.Errorf("F follows an expression; want it left out: %v", values)
	}
}

// TestCompare checks that Compare finds each kind of difference.
func TestCompare(t *testing.T) {
	h := Parse(`struct c { __u32 qp_num; __u8 flag; __u8 pad[3]; union { __u32 a; __u16 b; } un; };`)
	c, err := h.Layout("c")
	if err != nil {
		t.Fatal(err)
	}
	type good struct {
		QPNum uint32
		Flag  uint8
		Pad   [3]uint8
		Un    uint32
	}
	if d := Compare(good{}, c, nil); len(d) != 0 {
		t.Errorf("good: %v", d)
	}
	type viaPath struct {
		QPNum uint32
		Flag  uint8
		Pad   [3]uint8
		B     uint16
		Rest  [2]byte
	}
	if d := Compare(viaPath{}, c, map[string]string{"B": "un.b", "Rest": ""}); len(d) != 0 {
		t.Errorf("viaPath: %v", d)
	}
	type wrong struct {
		QPNum uint16
		Flag  uint8
		Pad   [3]uint8
		Other uint32
	}
	if d := Compare(wrong{}, c, nil); len(d) != 6 { // size, padding, QPNum, Flag and Pad moved, Other
		t.Errorf("wrong: %d differences %v", len(d), d)
	}
	type padded struct {
		Flag  uint8
		QPNum uint32
		Pad   [3]uint8
	}
	if d := Compare(padded{}, c, nil); len(d) == 0 {
		t.Error("padded: no difference found")
	}
}

func TestReadMissing(t *testing.T) {
	_, _, err := Read("/nonexistent/rdma/x.h")
	if !errors.Is(err, ErrNoHeader) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %v does not match ErrNoHeader and fs.ErrNotExist", err)
	}
}
