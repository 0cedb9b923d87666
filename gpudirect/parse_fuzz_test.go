package gpudirect

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzScanKallsyms: /proc/kallsyms as any bytes (a file can be anything
// below --sysfs-root): no panic; a symbol is found only if a line names it
// exactly, and hidden addresses only when there were lines.
func FuzzScanKallsyms(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/proc/kallsyms")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("ffffffffc0a1b2c0 T ib_umem_dmabuf_get\t[ib_uverbs]\n0000000000000000 t x\n"))
	f.Add([]byte("0 T ib_umem_dmabuf_get\t[\n \n\t\tT\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		scan, err := scanKallsyms(bytes.NewReader(b), wantedKallsyms)
		if err != nil {
			return
		}
		for name := range scan.Found {
			if !bytes.Contains(b, []byte(" "+name)) {
				t.Fatalf("found %q, which no line names", name)
			}
		}
		if scan.AddressesHidden && scan.Lines == 0 {
			t.Fatal("addresses hidden without lines")
		}
	})
}

// FuzzParseKernelConfig: a kernel .config as any text: every wanted
// option gets a value, "n" unless a line sets it.
func FuzzParseKernelConfig(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/boot/config-*")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil && len(b) < 1<<16 {
			f.Add(string(b))
		}
	}
	f.Add("CONFIG_DMA_SHARED_BUFFER=y\n# CONFIG_INFINIBAND_ON_DEMAND_PAGING is not set\nCONFIG_INFINIBAND_USER_MEM=\n")
	f.Fuzz(func(t *testing.T, text string) {
		options, err := parseKernelConfig(strings.NewReader(text))
		if err != nil {
			return
		}
		for _, o := range kernelConfigOptions {
			v, ok := options[o.name]
			if !ok || (v != "n" && !strings.Contains(text, o.name+"="+v)) {
				t.Fatalf("%s = %q (present %v), not from the text", o.name, v, ok)
			}
		}
	})
}
