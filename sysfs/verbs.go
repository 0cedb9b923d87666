package sysfs

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrNoVerbsDevice means that no class/infiniband_verbs/uverbsN names the
// RDMA device: ib_uverbs is not loaded, or the device has no user verbs.
var ErrNoVerbsDevice = errors.New("no uverbs device")

// VerbsDevice is a user verbs character device,
// /sys/class/infiniband_verbs/uverbsN, and the RDMA device it serves.
type VerbsDevice struct {
	Name       string // "uverbs0"; the char device is /dev/infiniband/<Name>
	Device     string // ibdev: the RDMA device name
	ABIVersion int    // abi_version: the driver's uverbs ABI (rxe 2, mlx5 1)
	Major      uint32 // dev "231:192"
	Minor      uint32
}

// VerbsABIVersion reads class/infiniband_verbs/abi_version, the uverbs ABI
// of the kernel (IB_USER_VERBS_ABI_VERSION, 6 since 2.6.20).
func (f FS) VerbsABIVersion() (int, error) {
	v, err := f.readUint("class/infiniband_verbs/abi_version", 32)
	return int(v), err
}

// VerbsDevices reads every uverbs device, skipping those that vanish or are
// disassociated (ENODEV) while being read.
func (f FS) VerbsDevices() ([]VerbsDevice, error) {
	names, err := f.listNames("class/infiniband_verbs")
	if err != nil {
		return nil, err
	}
	names = slices.DeleteFunc(names, func(name string) bool { return !strings.HasPrefix(name, "uverbs") }) // abi_version
	slices.Sort(names)
	return readEach(names, f.VerbsDevice)
}

// VerbsDevice reads class/infiniband_verbs/name.
func (f FS) VerbsDevice(name string) (VerbsDevice, error) {
	if err := CheckName("uverbs device", name); err != nil {
		return VerbsDevice{}, err
	}
	dir := "class/infiniband_verbs/" + name
	d := VerbsDevice{Name: name}
	var err error
	if d.Device, err = f.ReadAttr(dir + "/ibdev"); err != nil {
		return VerbsDevice{}, err
	}
	abi, err := f.readUint(dir+"/abi_version", 32)
	if err != nil {
		return VerbsDevice{}, err
	}
	d.ABIVersion = int(abi)
	dev, err := f.ReadAttr(dir + "/dev")
	if err != nil {
		return VerbsDevice{}, err
	}
	if d.Major, d.Minor, err = parseDevNumber(dev); err != nil {
		return VerbsDevice{}, fmt.Errorf("sys/%s/dev: %w", dir, err)
	}
	return d, nil
}

// parseDevNumber parses a dev attribute, "<major>:<minor>" in decimal.
func parseDevNumber(dev string) (major, minor uint32, err error) {
	ma, mi, ok := strings.Cut(dev, ":")
	major64, err1 := strconv.ParseUint(ma, 10, 32)
	minor64, err2 := strconv.ParseUint(mi, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("%q: want \"<major>:<minor>\"", dev)
	}
	return uint32(major64), uint32(minor64), nil
}

// VerbsDeviceFor finds the uverbs device whose ibdev is the RDMA device
// ibdev. It never derives the name from the device's index: the numbering
// of uverbsN follows registration order, not the RDMA device's. Only the
// ibdev of each candidate is read until one matches: with many devices,
// reading every attribute of every uverbs device made `grdma port`
// quadratic (BENCHMARKS.md).
func (f FS) VerbsDeviceFor(ibdev string) (VerbsDevice, error) {
	if err := CheckName("RDMA device", ibdev); err != nil {
		return VerbsDevice{}, err
	}
	names, err := f.listNames("class/infiniband_verbs")
	if err != nil {
		return VerbsDevice{}, err
	}
	slices.Sort(names)
	for _, name := range names {
		if !strings.HasPrefix(name, "uverbs") {
			continue // abi_version
		}
		got, err := f.ReadAttr("class/infiniband_verbs/" + name + "/ibdev")
		switch {
		case IsGone(err):
		case err != nil:
			return VerbsDevice{}, err
		case got == ibdev:
			return f.VerbsDevice(name)
		}
	}
	return VerbsDevice{}, fmt.Errorf("%s: %w in sys/class/infiniband_verbs", ibdev, ErrNoVerbsDevice)
}
