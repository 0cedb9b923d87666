package grammar_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/nldev"
)

func TestParseNumList(t *testing.T) {
	ok := map[string]nldev.NumList{
		"7":                    {{Lo: 7, Hi: 7}},
		"1-3,7":                {{Lo: 1, Hi: 3}, {Lo: 7, Hi: 7}},
		",1,2":                 {{Lo: 1, Hi: 1}, {Lo: 2, Hi: 2}},
		"0x1f":                 {{Lo: 31, Hi: 31}},
		"0x10-0x20":            {{Lo: 16, Hi: 32}},
		"5-5":                  {{Lo: 5, Hi: 5}},
		"18446744073709551615": {{Lo: 1<<64 - 1, Hi: 1<<64 - 1}},
	}
	for in, want := range ok {
		got, err := grammar.ParseNumList(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("grammar.ParseNumList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]string{
		"":                     "holds no number",
		",":                    "holds no number",
		"1-":                   `"" is not a number`,
		"-3":                   `"" is not a number`,
		"1--3":                 `"-3" is not a number`,
		"3-1":                  `range "3-1" runs backwards`,
		"abc":                  `"abc" is not a number`,
		"0x":                   `"0x" is not a number`,
		"+5":                   `"+5" is not a number`,
		"1_000":                `"1_000" is not a number`,
		"18446744073709551616": "does not fit in 64 bits",
		"1-2-3":                `"2-3" is not a number`,
	}
	for in, want := range bad {
		if _, err := grammar.ParseNumList(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("grammar.ParseNumList(%q): error %v, want %q", in, err, want)
		}
	}
}

// FuzzParseNumList: the value of a numeric res filter ("1-3,7", hex
// allowed) parses to ordered ranges, or is rejected; what is accepted,
// written back as ranges, parses to the same ranges.
func FuzzParseNumList(f *testing.F) {
	for _, s := range []string{"1", "1-3,7", ",1,2", "0x1f", "5-3", "1-", "-1", "18446744073709551615", "18446744073709551616", "1,,2", "0X-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ranges, err := grammar.ParseNumList(s)
		if err != nil {
			return
		}
		var parts []string
		for _, r := range ranges {
			if r.Hi < r.Lo {
				t.Fatalf("%q: range %d-%d runs backwards", s, r.Lo, r.Hi)
			}
			parts = append(parts, strconv.FormatUint(r.Lo, 10)+"-"+strconv.FormatUint(r.Hi, 10))
		}
		back, err := grammar.ParseNumList(strings.Join(parts, ","))
		if err != nil || len(back) != len(ranges) {
			t.Fatalf("%q parses to %v; written back, %v, %v", s, ranges, back, err)
		}
		for i := range back {
			if back[i] != ranges[i] {
				t.Errorf("%q parses to %v; written back, %v", s, ranges, back)
			}
		}
	})
}

// TestParseResTypeAbbrev: res objects are abbreviated in rdma's table
// order (cmdline.Abbrev).
func TestParseResTypeAbbrev(t *testing.T) {
	if typ, ok := grammar.ParseResType("c"); !ok || typ != nldev.ResCMID {
		t.Errorf(`ParseResType("c") = %v, %v; rdma's table has cm_id before cq`, typ, ok)
	}
}

// TestParseFRMRPoolKey: rdma's key text (decode_pool_key), written back
// as rdma prints it.
func TestParseFRMRPoolKey(t *testing.T) {
	k, err := grammar.ParseFRMRPoolKey("0:1000:0:0")
	if err != nil || k.NumDMABlocks != 0x1000 || k.String() != "0:1000:0:0" {
		t.Errorf("0:1000:0:0: %+v, %v", k, err)
	}
	k, err = grammar.ParseFRMRPoolKey("ff:10:3:1:0")
	if err != nil || k.VendorKey != 0xff || k.AccessFlags != 3 || !k.ATS || k.String() != "ff:10:3:1" {
		t.Errorf("ff:10:3:1:0: %+v, %v", k, err)
	}
	for in, want := range map[string]string{
		"0:1000:0":        "expected 4 fields",
		"0:1000:0:2":      "ats is 0 or 1",
		"0:1:100000000:0": "does not fit in 32 bits",
		"0:1:0:0:5":       "unsupported pool attributes",
		"x:1:0:0":         "not a hexadecimal number",
	} {
		if _, err := grammar.ParseFRMRPoolKey(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}
