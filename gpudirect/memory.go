package gpudirect

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Memory holds the memory findings that affect RDMA memory registration.
type Memory struct {
	// HugePageSize is the default huge page size in bytes (proc/meminfo
	// Hugepagesize, as libfabric reads it); 0 if unknown.
	HugePageSize  uint64         `json:"huge_page_size_bytes"`
	HugePagePools []HugePagePool `json:"huge_page_pools"`
	// Memlock is nil when the limit could not be read.
	Memlock *Memlock `json:"memlock"`
	IOMMU   IOMMU    `json:"iommu"`
	// Warnings are the findings an operator should act on.
	Warnings []string `json:"warnings"`
	Signals  []Signal `json:"signals"`
}

// HugePagePool is one huge page size (sys/kernel/mm/hugepages/hugepages-<N>kB).
type HugePagePool struct {
	PageSize uint64 `json:"page_size_bytes"`
	Total    uint64 `json:"total"`    // nr_hugepages
	Free     uint64 `json:"free"`     // free_hugepages
	Reserved uint64 `json:"reserved"` // resv_hugepages
	Surplus  uint64 `json:"surplus"`  // surplus_hugepages
	Default  bool   `json:"default"`  // the Hugepagesize of proc/meminfo
}

// Memlock is RLIMIT_MEMLOCK: every ibv_reg_mr of host memory pins pages
// and counts against it, unless the process has CAP_IPC_LOCK.
type Memlock struct {
	// LimitBytes is the soft limit as getrlimit returns it
	// (MemlockUnlimited for none).
	LimitBytes uint64 `json:"limit_bytes"`
	Unlimited  bool   `json:"unlimited"`
}

// IOMMU is what sysfs and the kernel command line show of the IOMMU.
type IOMMU struct {
	// Mode is "off" (no IOMMU unit), "passthrough" (every group's type is
	// identity), "translated" (DMA or DMA-FQ), "mixed", or "unknown" (units
	// but no readable group types, and no iommu=pt on the command line).
	Mode string `json:"mode"`
	// Units are the entries of sys/class/iommu (dmar0, ivhd0...).
	Units []string `json:"units"`
	// GroupTypes counts sys/kernel/iommu_groups/*/type values.
	GroupTypes map[string]int `json:"group_types,omitempty"`
	// KernelParameters are the IOMMU parameters of proc/cmdline.
	KernelParameters []string `json:"kernel_parameters"`
}

const (
	meminfoPath     = "proc/meminfo"
	hugepagesPath   = "sys/kernel/mm/hugepages"
	iommuClassPath  = "sys/class/iommu"
	iommuGroupsPath = "sys/kernel/iommu_groups"
	cmdlinePath     = "proc/cmdline"
)

func readMemory(fsys fs.FS, opts Options) Memory {
	var m Memory
	m.readHugePages(fsys)
	m.readMemlock(opts)
	m.readIOMMU(fsys)
	if m.Warnings == nil {
		m.Warnings = []string{}
	}
	return m
}

// meminfoHugePages is the huge page part of proc/meminfo.
type meminfoHugePages struct {
	sizeKB                     uint64
	hasSize                    bool
	total, free, rsvd, surplus uint64
}

func readMeminfo(fsys fs.FS) (meminfoHugePages, error) {
	f, err := fsys.Open(meminfoPath)
	if err != nil {
		return meminfoHugePages{}, err
	}
	defer f.Close()
	var info meminfoHugePages
	fields := map[string]*uint64{
		"Hugepagesize":    &info.sizeKB,
		"HugePages_Total": &info.total,
		"HugePages_Free":  &info.free,
		"HugePages_Rsvd":  &info.rsvd,
		"HugePages_Surp":  &info.surplus,
	}
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		key, rest, ok := strings.Cut(lines.Text(), ":")
		target, wanted := fields[key]
		if !ok || !wanted {
			continue
		}
		value := strings.Fields(rest)
		if len(value) == 0 {
			continue
		}
		if n, err := strconv.ParseUint(value[0], 10, 64); err == nil {
			*target = n
			info.hasSize = info.hasSize || key == "Hugepagesize"
		}
	}
	return info, lines.Err()
}

func (m *Memory) readHugePages(fsys fs.FS) {
	info, err := readMeminfo(fsys)
	sizeSignal := Signal{Name: "huge_page_size", Source: displayPath(meminfoPath) + " Hugepagesize"}
	switch {
	case err != nil:
		sizeSignal.State, sizeSignal.Detail = StateUnknown, describeReadError(err)
	case !info.hasSize:
		sizeSignal.State, sizeSignal.Detail = StateNo, "no Hugepagesize line: kernel without hugetlbfs"
	default:
		m.HugePageSize = info.sizeKB << 10
		sizeSignal.State, sizeSignal.Value = StateYes, fmt.Sprintf("%d kB", info.sizeKB)
	}
	m.Signals = append(m.Signals, sizeSignal)

	m.HugePagePools = []HugePagePool{}
	entries, err := fs.ReadDir(fsys, hugepagesPath)
	if err != nil && info.hasSize {
		// No sysfs view: the default pool is still in meminfo.
		m.HugePagePools = append(m.HugePagePools, HugePagePool{PageSize: m.HugePageSize, Total: info.total,
			Free: info.free, Reserved: info.rsvd, Surplus: info.surplus, Default: true})
	}
	// By size, not by name: "hugepages-1048576kB" sorts before "hugepages-2048kB".
	slices.SortFunc(entries, func(a, b fs.DirEntry) int {
		sizeA, _ := parseHugePageDirName(a.Name())
		sizeB, _ := parseHugePageDirName(b.Name())
		return cmp.Compare(sizeA, sizeB)
	})
	for _, entry := range entries {
		sizeKB, ok := parseHugePageDirName(entry.Name())
		if !ok {
			continue
		}
		dir := path.Join(hugepagesPath, entry.Name())
		pool := HugePagePool{PageSize: sizeKB << 10, Default: info.hasSize && sizeKB == info.sizeKB}
		pool.Total, err = readUint(fsys, dir+"/nr_hugepages")
		pool.Free, _ = readUint(fsys, dir+"/free_hugepages")
		pool.Reserved, _ = readUint(fsys, dir+"/resv_hugepages")
		pool.Surplus, _ = readUint(fsys, dir+"/surplus_hugepages")
		s := Signal{Name: "huge_pages:" + strings.TrimPrefix(entry.Name(), "hugepages-"), Source: displayPath(dir),
			Value: fmt.Sprintf("total %d, free %d", pool.Total, pool.Free)}
		switch {
		case err != nil:
			s.State, s.Value, s.Detail = StateUnknown, "", describeReadError(err)
		case pool.Total > 0:
			s.State = StateYes
		default:
			s.State = StateNo
		}
		m.HugePagePools = append(m.HugePagePools, pool)
		m.Signals = append(m.Signals, s)
	}
}

// parseHugePageDirName reads "hugepages-2048kB" as 2048.
func parseHugePageDirName(name string) (sizeKB uint64, ok bool) {
	digits, ok := strings.CutPrefix(name, "hugepages-")
	if !ok {
		return 0, false
	}
	digits, ok = strings.CutSuffix(digits, "kB")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

func readUint(fsys fs.FS, path string) (uint64, error) {
	text, err := readTrimmed(fsys, path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(text, 10, 64)
}

func (m *Memory) readMemlock(opts Options) {
	s := Signal{Name: "memlock", Source: "options (RLIMIT_MEMLOCK)"}
	var limit uint64
	if opts.MemlockLimit != nil {
		limit = *opts.MemlockLimit
	} else {
		s.Source = "getrlimit(RLIMIT_MEMLOCK) of this process"
		var err error
		if limit, err = callerMemlockLimit(); err != nil {
			s.State, s.Detail = StateUnknown, err.Error()
			m.Signals = append(m.Signals, s)
			return
		}
	}
	m.Memlock = &Memlock{LimitBytes: limit, Unlimited: limit == MemlockUnlimited}
	minimum := opts.MinMemlock
	if minimum == 0 {
		minimum = DefaultMinMemlock
	}
	switch {
	case limit == MemlockUnlimited:
		s.State, s.Value = StateYes, "unlimited"
	case limit == 0:
		s.State, s.Value = StateNo, "0"
		m.warn("RLIMIT_MEMLOCK is 0: ibv_reg_mr fails with EPERM unless the process has CAP_IPC_LOCK; set it to unlimited (ulimit -l unlimited, LimitMEMLOCK=infinity)")
	case limit < minimum:
		s.State, s.Value = StateNo, formatBytes(limit)
		m.warn(fmt.Sprintf("RLIMIT_MEMLOCK is %s: registering more than that fails with ENOMEM unless the process has CAP_IPC_LOCK; set it to unlimited (ulimit -l unlimited, LimitMEMLOCK=infinity)", formatBytes(limit)))
	default:
		s.State, s.Value = StateYes, formatBytes(limit)
	}
	s.Detail = fmt.Sprintf("pinned host memory of ibv_reg_mr counts against it; below %s is a warning", formatBytes(minimum))
	m.Signals = append(m.Signals, s)
}

func (m *Memory) warn(message string) { m.Warnings = append(m.Warnings, message) }

// formatBytes prints a power-of-two size the way ulimit users read it.
func formatBytes(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	unit := 0
	for n >= 1024 && n%1024 == 0 && unit < len(units)-1 {
		n /= 1024
		unit++
	}
	return fmt.Sprintf("%d %s", n, units[unit])
}

// iommuParameterPrefixes are the kernel parameters that set the IOMMU mode.
var iommuParameterPrefixes = []string{"iommu=", "intel_iommu=", "amd_iommu=", "iommu.passthrough=", "iommu.strict="}

func (m *Memory) readIOMMU(fsys fs.FS) {
	iommu := IOMMU{Units: []string{}, KernelParameters: []string{}}

	unitsSignal := Signal{Name: "iommu_units", Source: displayPath(iommuClassPath)}
	entries, err := fs.ReadDir(fsys, iommuClassPath)
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		unitsSignal.State, unitsSignal.Detail = StateUnknown, describeReadError(err)
	default:
		for _, entry := range entries {
			iommu.Units = append(iommu.Units, entry.Name())
		}
		unitsSignal.State, unitsSignal.Value = stateOf(len(iommu.Units) > 0), strings.Join(iommu.Units, " ")
	}

	groupsSignal := Signal{Name: "iommu_groups", Source: displayPath(iommuGroupsPath) + "/*/type"}
	var groups int
	iommu.GroupTypes, groups, err = readIOMMUGroupTypes(fsys)
	switch {
	case err != nil:
		groupsSignal.State, groupsSignal.Detail = StateUnknown, describeReadError(err)
	case groups > 0 && len(iommu.GroupTypes) == 0:
		groupsSignal.State = StateUnknown
		groupsSignal.Detail = fmt.Sprintf("%d groups without a type file (it appeared in Linux 5.11)", groups)
	default:
		groupsSignal.State, groupsSignal.Value = stateOf(len(iommu.GroupTypes) > 0), formatCounts(iommu.GroupTypes)
	}

	cmdlineSignal := Signal{Name: "iommu_kernel_parameters", Source: displayPath(cmdlinePath)}
	cmdline, err := readTrimmed(fsys, cmdlinePath)
	if err != nil {
		cmdlineSignal.State, cmdlineSignal.Detail = StateUnknown, describeReadError(err)
	} else {
		for _, parameter := range strings.Fields(cmdline) {
			if slices.ContainsFunc(iommuParameterPrefixes, func(p string) bool { return strings.HasPrefix(parameter, p) }) {
				iommu.KernelParameters = append(iommu.KernelParameters, parameter)
			}
		}
		cmdlineSignal.State = stateOf(len(iommu.KernelParameters) > 0)
		cmdlineSignal.Value = strings.Join(iommu.KernelParameters, " ")
	}

	iommu.Mode = iommuMode(iommu, unitsSignal.State)
	if iommu.Mode == "translated" || iommu.Mode == "mixed" {
		m.warn(fmt.Sprintf("IOMMU groups translate DMA (%s): GPU-NIC peer-to-peer then goes through the root complex, slowly or not at all; NVIDIA advises iommu=pt on bare metal",
			formatCounts(iommu.GroupTypes)))
	}
	m.IOMMU = iommu
	m.Signals = append(m.Signals, unitsSignal, groupsSignal, cmdlineSignal)
}

// readIOMMUGroupTypes counts the type of each IOMMU group and returns how
// many groups there are. A missing directory means no groups.
func readIOMMUGroupTypes(fsys fs.FS) (counts map[string]int, groups int, err error) {
	entries, err := fs.ReadDir(fsys, iommuGroupsPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	for _, group := range entries {
		groupType, err := readTrimmed(fsys, path.Join(iommuGroupsPath, group.Name(), "type"))
		if err != nil {
			continue // "type" appeared in 5.11; older kernels only have devices/
		}
		if counts == nil {
			counts = map[string]int{}
		}
		counts[groupType]++
	}
	return counts, len(entries), nil
}

func iommuMode(iommu IOMMU, units State) string {
	translated := iommu.GroupTypes["DMA"] + iommu.GroupTypes["DMA-FQ"]
	identity := iommu.GroupTypes["identity"]
	switch {
	case identity > 0 && translated == 0:
		return "passthrough"
	case translated > 0 && identity == 0:
		return "translated"
	case translated > 0:
		return "mixed"
	case units == StateNo && len(iommu.GroupTypes) == 0:
		return "off"
	case slices.Contains(iommu.KernelParameters, "iommu=pt") || slices.Contains(iommu.KernelParameters, "iommu.passthrough=1"):
		return "passthrough"
	}
	return "unknown"
}

func stateOf(present bool) State {
	if present {
		return StateYes
	}
	return StateNo
}

// formatCounts prints "DMA-FQ: 2, identity: 40" in key order.
func formatCounts(counts map[string]int) string {
	keys := slices.Sorted(maps.Keys(counts))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}
