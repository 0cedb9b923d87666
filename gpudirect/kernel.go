package gpudirect

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/grdma/grdma/internal/kver"
)

// dmabufImportSince is the upstream release that added RDMA dma-buf import
// (ib_umem_dmabuf_get and the REG_DMABUF_MR uverbs method).
var dmabufImportSince = kver.Version{Major: 5, Minor: 12}

// kernelVersionSignal compares the release with 5.12. The version is only a
// hint: distribution kernels backport the feature, which kallsyms reveals.
func (n *node) kernelVersionSignal() Signal {
	s := Signal{Name: "kernel_version", Source: displayPath(osReleasePath), Value: n.release,
		Detail: "RDMA dma-buf import landed in 5.12; backports show in kallsyms"}
	version, ok := kver.Parse(n.release)
	switch {
	case n.releaseErr != nil:
		s.State, s.Detail = StateUnknown, describeReadError(n.releaseErr)
	case !ok:
		s.State, s.Detail = StateUnknown, "unparsable release"
	case version.AtLeast(dmabufImportSince.Major, dmabufImportSince.Minor):
		s.State = StateYes
	default:
		s.State = StateNo
	}
	return s
}

// Kernel config options reported for dma-buf, with what each one means.
var kernelConfigOptions = []struct{ name, meaning string }{
	{"CONFIG_DMA_SHARED_BUFFER", "the dma-buf framework; NVIDIA's exporter is compiled out without it"},
	{"CONFIG_INFINIBAND_USER_MEM", "user memory registration; ib_umem_dmabuf_get is built with it"},
	{"CONFIG_INFINIBAND_ON_DEMAND_PAGING", "mlx5 refuses dma-buf MRs (EOPNOTSUPP) without it"},
	{"CONFIG_DMABUF_MOVE_NOTIFY", "needed by dynamic exporters (amdgpu P2P); NVIDIA's exporter is static and does not need it"},
	{"CONFIG_PCI_P2PDMA", "needed for AMD and NVMe peer-to-peer; neither NVIDIA path uses it"},
}

// kernelConfig holds the wanted options of the first readable config.
type kernelConfig struct {
	source  string
	options map[string]string // "y", "m", or "n" for "is not set" and absent
	err     error
}

// readKernelConfig tries proc/config.gz, then boot/config-<release>, then
// lib/modules/<release>/build/.config: the order the ROCm hipFile docs use.
func readKernelConfig(fsys fs.FS, release string, releaseErr error) kernelConfig {
	candidates := []string{"proc/config.gz"}
	if releaseErr == nil && release != "" {
		candidates = append(candidates, "boot/config-"+release, "lib/modules/"+release+"/build/.config")
	}
	var tried []string
	for _, path := range candidates {
		options, err := readConfigFile(fsys, path)
		if err == nil {
			return kernelConfig{source: displayPath(path), options: options}
		}
		if !errors.Is(err, fs.ErrNotExist) {
			tried = append(tried, displayPath(path)+": "+describeReadError(err))
		}
	}
	if len(tried) == 0 {
		return kernelConfig{err: fmt.Errorf("no kernel config found (%s)", joinDisplayPaths(candidates))}
	}
	return kernelConfig{err: errors.New(strings.Join(tried, "; "))}
}

func joinDisplayPaths(paths []string) string {
	shown := make([]string, len(paths))
	for i, p := range paths {
		shown[i] = displayPath(p)
	}
	return strings.Join(shown, ", ")
}

func readConfigFile(fsys fs.FS, path string) (map[string]string, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return nil, &fs.PathError{Op: "gunzip", Path: path, Err: err}
		}
		defer gz.Close()
		r = gz
	}
	return parseKernelConfig(r)
}

// parseKernelConfig keeps the wanted options from a .config stream:
// "CONFIG_X=y", "CONFIG_X=m", "# CONFIG_X is not set".
func parseKernelConfig(r io.Reader) (map[string]string, error) {
	options := make(map[string]string, len(kernelConfigOptions))
	for _, option := range kernelConfigOptions {
		options[option.name] = "n"
	}
	lines := bufio.NewScanner(r)
	for lines.Scan() {
		line := lines.Text()
		if name, value, ok := strings.Cut(line, "="); ok {
			if _, wanted := options[name]; wanted {
				options[name] = value
			}
		}
	}
	return options, lines.Err()
}

// signals reports every wanted option: yes for y or m, no for not set.
func (c kernelConfig) signals() []Signal {
	signals := make([]Signal, 0, len(kernelConfigOptions))
	for _, option := range kernelConfigOptions {
		s := Signal{Name: "config:" + option.name, Source: c.source, State: c.option(option.name), Detail: option.meaning}
		switch s.State {
		case StateUnknown:
			s.Source, s.Detail = "kernel config", c.err.Error()
		case StateYes:
			s.Value = c.options[option.name]
		default:
			s.Value = "not set"
		}
		signals = append(signals, s)
	}
	return signals
}

// option answers whether an option is y or m.
func (c kernelConfig) option(name string) State {
	if c.err != nil {
		return StateUnknown
	}
	if value := c.options[name]; value == "y" || value == "m" {
		return StateYes
	}
	return StateNo
}
