package nldev

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestSplitMessages splits every recorded reply datagram and marshals the
// messages back: the bytes must be the datagram's.
func TestSplitMessages(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "nldev", "*", "nl", "*.bin"))
	if len(files) == 0 {
		t.Fatal("no recordings")
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, make([]byte, align4(len(b))-len(b))...)
		var back []byte
		n := 0
		for m, err := range splitMessages(b) {
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			mb, err := m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			back, n = append(back, mb...), n+1
		}
		if n == 0 || !bytes.Equal(back, b) {
			t.Errorf("%s: %d messages marshal to %d bytes, the datagram has %d", file, n, len(back), len(b))
		}
	}
}

func TestSplitMessagesBadLength(t *testing.T) {
	for _, length := range []byte{0, 8, 200} {
		b := make([]byte, 32)
		b[0] = length
		var got error
		for _, err := range splitMessages(b) {
			got = err
		}
		if !errors.Is(got, errBadLength) {
			t.Errorf("length %d: error %v, want errBadLength", length, got)
		}
	}
}
