package kver

import (
	"fmt"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		release     string
		want        Version
		ok, atLeast bool // atLeast: 5.12 or newer
	}{
		{"6.8.0-45-generic", Version{6, 8}, true, true},
		{"5.12.0", Version{5, 12}, true, true},
		{"5.11.22-100.fc32.x86_64", Version{5, 11}, true, false},
		{"5.4.0-150-generic", Version{5, 4}, true, false},
		{"4.18.0-553.el8_10.x86_64", Version{4, 18}, true, false},
		{"6.12.10-arch1-1", Version{6, 12}, true, true},
		{"6.1", Version{6, 1}, true, true},
		{"", Version{}, false, false},
		{"linux", Version{}, false, false},
		{"6.x", Version{}, false, false},
	} {
		got, ok := Parse(tc.release)
		if got != tc.want || ok != tc.ok || ok && got.AtLeast(5, 12) != tc.atLeast {
			t.Errorf("Parse(%q) = %v, %v (5.12+: %v); want %v, %v (5.12+: %v)",
				tc.release, got, ok, got.AtLeast(5, 12), tc.want, tc.ok, tc.atLeast)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"6.8.0-45-generic", "4.18.0-553.el8_10.x86_64", "6.12", "6.", ".1", "99999999999999999999.1", "-1.-2", "6.x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := Parse(s)
		if !ok {
			return
		}
		if back, ok := Parse(fmt.Sprintf("%d.%d", v.Major, v.Minor)); !ok || back != v {
			t.Fatalf("%q -> %d.%d does not parse back", s, v.Major, v.Minor)
		}
	})
}

func ExampleParse() {
	v, ok := Parse("6.1.0-56-amd64")
	fmt.Println(v.Major, v.Minor, ok, v.AtLeast(6, 4))
	// Output: 6 1 true false
}
