package nldev

import (
	"fmt"
	"strings"
	"unicode"
)

// Kernel name limits (IB_DEVICE_NAME_MAX, IFNAMSIZ), both counting the NUL.
const (
	maxDeviceName = 64
	maxNetdevName = 16
)

// ValidateDeviceName checks an RDMA device name the way the kernel will,
// and also refuses what would break sysfs paths or scripts (/ and spaces).
func ValidateDeviceName(name string) error {
	switch {
	case name == "":
		return &InvalidArgumentError{"RDMA device name is empty"}
	case len(name) >= maxDeviceName:
		return &InvalidArgumentError{fmt.Sprintf("RDMA device name %q is %d bytes; the limit is %d", name, len(name), maxDeviceName-1)}
	case strings.Contains(name, "%"):
		return &InvalidArgumentError{fmt.Sprintf("RDMA device name %q contains %%; the kernel reserves it for name templates", name)}
	case strings.Contains(name, "/"):
		return &InvalidArgumentError{fmt.Sprintf("RDMA device name %q contains '/', which sysfs cannot name", name)}
	}
	for _, r := range name {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return &InvalidArgumentError{fmt.Sprintf("RDMA device name %q must be printable ASCII without spaces", name)}
		}
	}
	return nil
}

// validateShortName checks a netdev or link type name against IFNAMSIZ.
func validateShortName(what, name string) error {
	switch {
	case name == "":
		return &InvalidArgumentError{what + " name is empty"}
	case len(name) >= maxNetdevName:
		return &InvalidArgumentError{fmt.Sprintf("%s name %q is %d bytes; the limit is %d", what, name, len(name), maxNetdevName-1)}
	}
	return nil
}
