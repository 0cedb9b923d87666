package gpudirect

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
)

const kallsymsPath = "proc/kallsyms"

// Symbols looked up in proc/kallsyms. Each capability symbol is paired with
// a marker exported by the same module, so that its absence only counts as
// "no" when the module that would hold it is loaded.
const (
	// symRegisterDevice marks ib_core as loaded (or built in).
	symRegisterDevice = "ib_register_device"
	// symPeerMemClient is the PeerDirect API of MLNX_OFED/DOCA-OFED ib_core;
	// libfabric's verbs provider and RCCL look for it.
	symPeerMemClient = "ib_register_peer_memory_client"
	// symUmemGet marks the user-memory code (umem.o) as loaded: ib_uverbs
	// on current kernels. umem_dmabuf.o is linked into the same module.
	symUmemGet = "ib_umem_get"
	// symUmemDmabufGet is RDMA dma-buf import (Linux 5.12+); libfabric's
	// verbs provider looks for it.
	symUmemDmabufGet = "ib_umem_dmabuf_get"
)

var wantedKallsyms = []string{symRegisterDevice, symPeerMemClient, symUmemGet, symUmemDmabufGet}

// kallsymsEntry is where a symbol was found.
type kallsymsEntry struct {
	Type   byte   // 'T', 't', 'r'...
	Module string // "" for the core kernel image
}

// kallsymsScan is the result of one pass over a kallsyms file.
type kallsymsScan struct {
	Found map[string]kallsymsEntry
	Lines int
	// AddressesHidden is set when every address read as zero: the reader
	// lacks CAP_SYSLOG or kptr_restrict is set. Names are still real.
	AddressesHidden bool
}

// scanKallsyms finds the wanted symbols in one streaming pass. Lines have
// the form "ffffffffc0a1b2c0 T ib_umem_dmabuf_get\t[ib_uverbs]"; the
// module part is absent for the core image. Names match exactly, so
// "__ksymtab_ib_umem_dmabuf_get" or "ib_umem_dmabuf_get_pinned" do not count
// for "ib_umem_dmabuf_get" (libfabric's strstr would; the exported symbol
// itself is always listed beside those).
func scanKallsyms(r io.Reader, wanted []string) (kallsymsScan, error) {
	wantedSet := make(map[string]bool, len(wanted))
	for _, name := range wanted {
		wantedSet[name] = true
	}
	scan := kallsymsScan{Found: make(map[string]kallsymsEntry, len(wanted))}
	sawNonZeroAddress := false
	lines := bufio.NewScanner(r)
	lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for lines.Scan() {
		line := lines.Bytes()
		scan.Lines++
		address, rest, ok := bytes.Cut(line, []byte{' '})
		if !ok || len(rest) < 3 || rest[1] != ' ' {
			continue
		}
		if !sawNonZeroAddress && bytes.IndexFunc(address, func(r rune) bool { return r != '0' }) >= 0 {
			sawNonZeroAddress = true
		}
		name, module, hasModule := bytes.Cut(rest[2:], []byte{'\t'})
		if !wantedSet[string(name)] {
			continue
		}
		entry := kallsymsEntry{Type: rest[0]}
		if hasModule {
			entry.Module = string(bytes.Trim(module, "[] "))
		}
		scan.Found[string(name)] = entry
	}
	if err := lines.Err(); err != nil {
		return kallsymsScan{}, err
	}
	scan.AddressesHidden = scan.Lines > 0 && !sawNonZeroAddress
	return scan, nil
}

// kallsymsView is the scan of the machine's kallsyms, or why it failed.
type kallsymsView struct {
	scan kallsymsScan
	err  error
}

func readKallsyms(fsys fs.FS) kallsymsView {
	f, err := fsys.Open(kallsymsPath)
	if err != nil {
		return kallsymsView{err: err}
	}
	defer f.Close()
	scan, err := scanKallsyms(f, wantedKallsyms)
	if err == nil && scan.Lines == 0 {
		// An empty kallsyms is a kernel without CONFIG_KALLSYMS: no names.
		err = fmt.Errorf("%s is empty", displayPath(kallsymsPath))
	}
	return kallsymsView{scan: scan, err: err}
}

// has answers whether the symbol is in kallsyms: yes, no, or unknown when
// the file could not be read.
func (k kallsymsView) has(name string) State {
	if k.err != nil {
		return StateUnknown
	}
	if _, ok := k.scan.Found[name]; ok {
		return StateYes
	}
	return StateNo
}

// signal reports one symbol lookup. meaning says what presence implies.
func (k kallsymsView) signal(signalName, symbol, meaning string) Signal {
	s := Signal{
		Name:   signalName,
		Source: displayPath(kallsymsPath) + " symbol " + symbol,
		State:  k.has(symbol),
		Detail: meaning,
	}
	switch s.State {
	case StateUnknown:
		s.Detail = "kallsyms unreadable: " + describeReadError(k.err)
	case StateYes:
		entry := k.scan.Found[symbol]
		s.Value = fmt.Sprintf("%c %s", entry.Type, moduleLabel(entry.Module))
		if k.scan.AddressesHidden {
			s.Detail += "; addresses hidden (kptr_restrict), names still count"
		}
	}
	return s
}

func moduleLabel(module string) string {
	if module == "" {
		return "[built-in]"
	}
	return "[" + module + "]"
}
