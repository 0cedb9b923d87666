package gpudirect

import (
	"errors"
	"io/fs"
	"strings"
)

const (
	nvidiaProcVersionPath = "proc/driver/nvidia/version"
	nvidiaModulePath      = "sys/module/nvidia"
)

// nvidiaDriver is what the machine says about the NVIDIA kernel driver.
type nvidiaDriver struct {
	loadedState                State
	loadedSource, loadedDetail string
	version                    string
	openState                  State
	openSource, openDetail     string
}

// readNVIDIADriver prefers proc/driver/nvidia/version, whose first line
// names the flavour: "NVRM version: NVIDIA UNIX Open Kernel Module for
// x86_64  560.35.03  Release Build ..." (open) or "NVRM version: NVIDIA UNIX
// x86_64 Kernel Module  535.183.01  Sun May 12 ..." (proprietary). Without
// it, sys/module/nvidia shows the module is loaded, its version file the
// version, and its taint file the flavour: the proprietary module's
// "NVIDIA" licence taints the kernel with P, the open module's
// "Dual MIT/GPL" does not.
func readNVIDIADriver(fsys fs.FS) nvidiaDriver {
	var d nvidiaDriver
	firstLine, procErr := readFirstLine(fsys, nvidiaProcVersionPath)
	if procErr == nil {
		d.loadedState, d.loadedSource = StateYes, displayPath(nvidiaProcVersionPath)
		d.version = nvidiaVersionFromBanner(firstLine)
		d.openSource, d.openDetail = displayPath(nvidiaProcVersionPath), firstLine
		switch {
		case strings.Contains(firstLine, "Open Kernel Module"):
			d.openState = StateYes
		case strings.Contains(firstLine, "Kernel Module"):
			d.openState = StateNo
		default:
			d.openState, d.openDetail = StateUnknown, "unrecognised first line: "+firstLine
		}
		return d
	}

	_, moduleErr := fs.Stat(fsys, nvidiaModulePath)
	switch {
	case moduleErr == nil:
		d.loadedState, d.loadedSource = StateYes, displayPath(nvidiaModulePath)
		d.version, _ = readTrimmed(fsys, nvidiaModulePath+"/version")
		d.readTaintFlavour(fsys, procErr)
	case errors.Is(procErr, fs.ErrNotExist) && errors.Is(moduleErr, fs.ErrNotExist) && !procOrSysVisible(fsys):
		// An absent file proves nothing where /proc and /sys are not mounted.
		d.loadedState, d.loadedSource = StateUnknown, displayPath(nvidiaProcVersionPath)
		d.loadedDetail = "neither /proc nor /sys/module is visible"
		d.openState, d.openSource, d.openDetail = StateUnknown, displayPath(nvidiaProcVersionPath), d.loadedDetail
	case errors.Is(procErr, fs.ErrNotExist) && errors.Is(moduleErr, fs.ErrNotExist):
		d.loadedState, d.loadedSource = StateNo, displayPath(nvidiaProcVersionPath)
		d.loadedDetail = "neither " + displayPath(nvidiaProcVersionPath) + " nor " + displayPath(nvidiaModulePath) + " exists"
		d.openState, d.openSource, d.openDetail = StateNo, displayPath(nvidiaProcVersionPath), "no NVIDIA driver loaded"
	default:
		d.loadedState, d.loadedSource = StateUnknown, displayPath(nvidiaProcVersionPath)
		d.loadedDetail = displayPath(nvidiaProcVersionPath) + ": " + describeReadError(procErr) +
			"; " + displayPath(nvidiaModulePath) + ": " + describeReadError(moduleErr)
		d.openState, d.openSource, d.openDetail = StateUnknown, displayPath(nvidiaProcVersionPath), describeReadError(procErr)
	}
	return d
}

// procOrSysVisible reports whether procfs or sysfs is mounted in fsys:
// both always have these directories.
func procOrSysVisible(fsys fs.FS) bool {
	for _, dir := range []string{"proc/sys/kernel", "sys/module"} {
		if info, err := fs.Stat(fsys, dir); err == nil && info.IsDir() {
			return true
		}
	}
	return false
}

func (d *nvidiaDriver) readTaintFlavour(fsys fs.FS, procErr error) {
	const taintPath = nvidiaModulePath + "/taint"
	d.openSource = displayPath(taintPath)
	taint, err := readTrimmed(fsys, taintPath)
	switch {
	case err != nil:
		d.openState = StateUnknown
		d.openDetail = displayPath(nvidiaProcVersionPath) + ": " + describeReadError(procErr) +
			"; taint: " + describeReadError(err)
	case strings.Contains(taint, "P"):
		d.openState, d.openDetail = StateNo, "taint "+taint+": proprietary licence"
	default:
		d.openState, d.openDetail = StateYes, "taint "+taint+": no proprietary taint"
	}
}

// nvidiaVersionFromBanner returns the first dotted number after "Kernel
// Module" ("535.183.01"), skipping "for x86_64" in the open banner.
func nvidiaVersionFromBanner(line string) string {
	_, afterModule, ok := strings.Cut(line, "Kernel Module")
	if !ok {
		return ""
	}
	for _, field := range strings.Fields(afterModule) {
		if looksLikeVersion(field) {
			return field
		}
	}
	return ""
}

func looksLikeVersion(s string) bool {
	if s == "" || s[0] < '0' || s[0] > '9' || !strings.Contains(s, ".") {
		return false
	}
	return strings.Trim(s, "0123456789.") == ""
}

func readFirstLine(fsys fs.FS, path string) (string, error) {
	b, err := fs.ReadFile(fsys, path)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line), nil
}

func (d nvidiaDriver) loadedSignal() Signal {
	return Signal{Name: "nvidia_driver", Source: d.loadedSource, State: d.loadedState, Value: d.version, Detail: d.loadedDetail}
}

func (d nvidiaDriver) openSignal() Signal {
	return Signal{Name: "nvidia_open_kernel_module", Source: d.openSource, State: d.openState, Detail: d.openDetail}
}
