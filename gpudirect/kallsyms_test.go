package gpudirect

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestScanKallsyms(t *testing.T) {
	const text = "0000000000000000 A fixed_percpu_data\n" +
		"ffffffff81000000 T _stext\n" +
		"ffffffff81a3c2e0 T dma_buf_get\n" +
		"ffffffffc0a1c000 r __ksymtab_ib_register_peer_memory_client\t[ib_core]\n" + // not the symbol itself
		"ffffffffc0a1b400 T ib_umem_dmabuf_get_pinned\t[ib_uverbs]\n" + // longer name, same prefix
		"ffffffffc0a1b2c0 T ib_umem_dmabuf_get\t[ib_uverbs]\n" +
		"garbage without fields\n" +
		"ffffffff81234560 t ib_register_device\n" // built in: no module part
	scan, err := scanKallsyms(strings.NewReader(text), wantedKallsyms)
	if err != nil {
		t.Fatal(err)
	}
	want := kallsymsScan{
		Found: map[string]kallsymsEntry{
			symUmemDmabufGet:  {Type: 'T', Module: "ib_uverbs"},
			symRegisterDevice: {Type: 't'},
		},
		Lines: 8,
	}
	if diff := cmp.Diff(want, scan); diff != "" {
		t.Errorf("scan (-want +got):\n%s", diff)
	}
}

func TestScanKallsymsHiddenAddresses(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		hidden     bool
	}{
		{"non-root view", "0000000000000000 T _stext\n0000000000000000 T ib_register_device\t[ib_core]\n", true},
		{"root view", "0000000000000000 A fixed_percpu_data\nffffffff81000000 T _stext\n", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scan, err := scanKallsyms(strings.NewReader(tc.text), wantedKallsyms)
			if err != nil {
				t.Fatal(err)
			}
			if scan.AddressesHidden != tc.hidden {
				t.Errorf("AddressesHidden = %v, want %v", scan.AddressesHidden, tc.hidden)
			}
		})
	}
}

func TestNVIDIAVersionFromBanner(t *testing.T) {
	for banner, want := range map[string]string{
		"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  560.35.03  Release Build  (dvs-builder@U16-I3-B03-4-3)  Fri Aug 16 21:42:42 UTC 2024": "560.35.03",
		"NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024":                                                      "535.183.01",
		"NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.86.15  Release Build  (dvs-builder@U16-I3-D07-1-1)  Thu Jan 23 2025":             "570.86.15",
		"NVRM version: something else": "",
	} {
		if got := nvidiaVersionFromBanner(banner); got != want {
			t.Errorf("nvidiaVersionFromBanner(%q) = %q, want %q", banner, got, want)
		}
	}
}

func TestReadKernelConfigOrder(t *testing.T) {
	// kallsyms-hidden has only proc/config.gz; old-kernel only boot/config-*.
	for _, tc := range []struct {
		fixture, release, source, moveNotify string
	}{
		{"kallsyms-hidden", "6.12.10-arch1-1", "/proc/config.gz", "y"},
		{"old-kernel", "5.10.0-33-amd64", "/boot/config-5.10.0-33-amd64", "n"},
	} {
		config := readKernelConfig(os.DirFS(filepath.Join("testdata", tc.fixture)), tc.release, nil)
		if config.err != nil || config.source != tc.source || config.options["CONFIG_DMABUF_MOVE_NOTIFY"] != tc.moveNotify {
			t.Errorf("%s: config from %q (err %v), DMABUF_MOVE_NOTIFY %q; want %q, %q",
				tc.fixture, config.source, config.err, config.options["CONFIG_DMABUF_MOVE_NOTIFY"], tc.source, tc.moveNotify)
		}
	}
	missing := readKernelConfig(os.DirFS(t.TempDir()), "6.1.0", nil)
	if missing.err == nil || !strings.Contains(missing.err.Error(), "no kernel config found (/proc/config.gz, /boot/config-6.1.0") {
		t.Errorf("no config: err = %v", missing.err)
	}
}

// writeKallsyms writes a kallsyms file shaped like a distribution kernel
// with many modules: about 150k lines, the wanted symbols near the end.
func writeKallsyms(b *testing.B, lines int) (path string, size int64) {
	b.Helper()
	path = filepath.Join(b.TempDir(), "kallsyms")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	types := "TtTtdDbBrR"
	for i := range lines - 4 {
		address := 0xffffffff81000000 + uint64(i)*0x40
		if i%3 == 0 {
			fmt.Fprintf(w, "%016x %c drv%d_handle_request_%d\t[drv%d]\n", address, types[i%len(types)], i%97, i, i%97)
		} else {
			fmt.Fprintf(w, "%016x %c __pfx_kernel_function_%d\n", address, types[i%len(types)], i)
		}
	}
	fmt.Fprint(w, "ffffffffc0600000 T ib_register_device\t[ib_core]\n",
		"ffffffffc0601000 T ib_register_peer_memory_client\t[ib_core]\n",
		"ffffffffc0a1a000 T ib_umem_get\t[ib_uverbs]\n",
		"ffffffffc0a1b2c0 T ib_umem_dmabuf_get\t[ib_uverbs]\n")
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	info, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path, info.Size()
}

func BenchmarkScanKallsyms(b *testing.B) {
	path, size := writeKallsyms(b, 150_000)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		scan, err := scanKallsyms(f, wantedKallsyms)
		f.Close()
		if err != nil || len(scan.Found) != len(wantedKallsyms) || scan.Lines != 150_000 {
			b.Fatalf("scan found %d of %d symbols in %d lines: %v", len(scan.Found), len(wantedKallsyms), scan.Lines, err)
		}
	}
}
