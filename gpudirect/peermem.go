package gpudirect

import (
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Peer-memory client modules, as they appear under sys/module (a dash in
// the file name becomes an underscore).
var peerMemModules = []struct{ name, meaning string }{
	{"nvidia_peermem", "NVIDIA's peer-memory client (driver R470+); NCCL 2.23.4+ and UCX check it"},
	{"nv_peer_mem", "the legacy GitHub peer-memory client; UCX checks it"},
}

const memoryPeersPath = "sys/kernel/mm/memory_peers"

// nvidiaMemoryPeers are the memory_peers clients that serve NVIDIA GPU
// memory: nv_mem and nv_mem_nc (nv_peer_mem, nvidia-peermem; NCCL, UCX,
// Open MPI) and nvidia-peermem (NCCL 2.9.8 to 2.22, NVSHMEM).
var nvidiaMemoryPeers = map[string]bool{"nv_mem": true, "nv_mem_nc": true, "nvidia-peermem": true}

func readPeerMemModules(fsys fs.FS) []Signal {
	// A module directory missing from an unmounted sysfs proves nothing.
	info, err := fs.Stat(fsys, "sys/module")
	sysModuleVisible := err == nil && info.IsDir()
	signals := make([]Signal, 0, len(peerMemModules))
	for _, module := range peerMemModules {
		dir := "sys/module/" + module.name
		s := Signal{Name: "module:" + module.name, Source: displayPath(dir + "/version"), Detail: module.meaning}
		_, err := fs.Stat(fsys, dir)
		switch {
		case !sysModuleVisible:
			s.State, s.Detail = StateUnknown, "/sys/module is not visible"
		case err == nil:
			s.State = StateYes
			s.Value, _ = readTrimmed(fsys, dir+"/version")
		case errors.Is(err, fs.ErrNotExist):
			s.State = StateNo
		default:
			s.State, s.Detail = StateUnknown, describeReadError(err)
		}
		signals = append(signals, s)
	}
	return signals
}

// readMemoryPeers lists the clients registered with MLNX_OFED's PeerDirect,
// one directory each with a version file. The directory is missing on
// inbox kernels and on newer OFED (6.6+) even when peer memory works, so
// only its presence is evidence.
func readMemoryPeers(fsys fs.FS) []Signal {
	entries, err := fs.ReadDir(fsys, memoryPeersPath)
	dirSignal := Signal{Name: "memory_peers", Source: displayPath(memoryPeersPath), State: StateNo}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		dirSignal.Detail = "absent, which proves nothing: inbox kernels and OFED on 6.6+ lack it"
		return []Signal{dirSignal}
	case err != nil:
		dirSignal.State, dirSignal.Detail = StateUnknown, describeReadError(err)
		return []Signal{dirSignal}
	case len(entries) == 0:
		dirSignal.Detail = "no peer-memory client registered"
		return []Signal{dirSignal}
	}
	signals := make([]Signal, 0, len(entries))
	for _, entry := range entries {
		versionPath := path.Join(memoryPeersPath, entry.Name(), "version")
		s := Signal{Name: "memory_peer:" + entry.Name(), Source: displayPath(versionPath)}
		version, err := readTrimmed(fsys, versionPath)
		switch {
		case err == nil:
			s.State, s.Value = StateYes, version
		case errors.Is(err, fs.ErrNotExist):
			s.State = StateNo
		default:
			s.State, s.Detail = StateUnknown, describeReadError(err)
		}
		if nvidiaMemoryPeers[entry.Name()] {
			s.Detail = joinDetail(s.Detail, "NVIDIA GPU peer-memory client; NCCL, UCX and Open MPI check it")
		} else {
			s.Detail = joinDetail(s.Detail, "not an NVIDIA GPU client")
		}
		signals = append(signals, s)
	}
	return signals
}

func joinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// peerMemClient returns the first signal showing an NVIDIA peer-memory
// client loaded, and whether any client source was unreadable.
func (n *node) peerMemClient() (client *Signal, unreadable bool) {
	for i := range n.peerModules {
		if n.peerModules[i].State == StateYes && client == nil {
			client = &n.peerModules[i]
		}
		unreadable = unreadable || n.peerModules[i].State == StateUnknown
	}
	for i := range n.memoryPeers {
		s := &n.memoryPeers[i]
		clientName, isClient := strings.CutPrefix(s.Name, "memory_peer:")
		isNVIDIA := isClient && nvidiaMemoryPeers[clientName]
		if s.State == StateYes && isNVIDIA && client == nil {
			client = s
		}
		unreadable = unreadable || s.State == StateUnknown && (isNVIDIA || !isClient)
	}
	return client, unreadable
}

func describeClient(s *Signal) string {
	if module, ok := strings.CutPrefix(s.Name, "module:"); ok {
		if s.Value == "" {
			return module + " is loaded"
		}
		return module + " " + s.Value + " is loaded"
	}
	clientName, _ := strings.CutPrefix(s.Name, "memory_peer:")
	return "peer-memory client " + clientName + " " + s.Value + " is registered"
}

// peerMemVerdict decides the peer-memory path. dmabuf, decided first,
// shapes the advice when peer memory cannot work on this kernel.
func (n *node) peerMemVerdict(dmabuf Verdict) Verdict {
	api := n.kallsyms.signal("peer_memory_api", symPeerMemClient,
		"the PeerDirect API of MLNX_OFED/DOCA-OFED ib_core; libfabric and RCCL check it")
	v := Verdict{Signals: slices.Concat(
		[]Signal{
			n.nvidia.loadedSignal(),
			n.rdmaCoreSignal(),
			api,
		},
		n.peerModules,
		n.memoryPeers,
	)}
	client, clientsUnreadable := n.peerMemClient()
	switch {
	case client != nil, api.State == StateYes:
		v.KernelSupport = new(true)
	case api.State == StateNo && !n.rdmaStackAbsent():
		v.KernelSupport = new(false)
	}

	var b verdictBuilder
	switch {
	case n.nvidia.loadedState == StateNo:
		noNVIDIADriver(&v)
		return v
	case client != nil:
		// A loaded client proves the rest: nvidia_peermem refuses to load
		// (EINVAL) on an ib_core without the PeerDirect API.
	case n.rdmaStackAbsent():
		b.block(noRDMAStackReason, noRDMAStackAction)
	case api.State == StateNo:
		action := "install MLNX_OFED or DOCA-OFED (PeerDirect) and load nvidia_peermem, or set up dma-buf"
		if dmabuf.Supported != nil && *dmabuf.Supported {
			action = "use dma-buf, which works on this node; peer memory needs MLNX_OFED or DOCA-OFED"
		}
		b.block("ib_core lacks the PeerDirect API (no "+symPeerMemClient+"), so nvidia_peermem cannot load", action)
	case clientsUnreadable:
		b.undecided("no NVIDIA peer-memory client seen, but some of its sources are unreadable", "")
	case api.State == StateYes:
		b.block("ib_core has the PeerDirect API but no NVIDIA peer-memory client is loaded",
			"load nvidia_peermem (modprobe nvidia-peermem)")
	default:
		b.block("no NVIDIA peer-memory client is loaded, and /proc/kallsyms is unreadable so the PeerDirect API is unknown",
			"load nvidia_peermem; it needs the PeerDirect API of MLNX_OFED or DOCA-OFED")
	}
	successReason := ""
	if client != nil {
		successReason = describeClient(client)
	}
	b.fill(&v, successReason)
	return v
}
