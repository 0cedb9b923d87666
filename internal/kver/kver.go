// Package kver compares Linux kernel releases by their major and minor
// numbers: "6.8.0-45-generic" is 6.8, "4.18.0-553.el8_10.x86_64" 4.18.
// A release says what upstream had; distribution kernels backport, so a
// caller that can see a feature itself should look there first.
package kver

import (
	"strconv"
	"strings"
)

// Version is a release's major.minor.
type Version struct{ Major, Minor int }

// Parse reads the major.minor at the start of release (uname -r,
// /proc/sys/kernel/osrelease); ok is false when it has none.
func Parse(release string) (v Version, ok bool) {
	majorText, rest, ok := strings.Cut(release, ".")
	if !ok {
		return Version{}, false
	}
	minorText := rest[:len(rest)-len(strings.TrimLeft(rest, "0123456789"))]
	major, errMajor := strconv.Atoi(majorText)
	minor, errMinor := strconv.Atoi(minorText)
	if errMajor != nil || errMinor != nil {
		return Version{}, false
	}
	return Version{major, minor}, true
}

// AtLeast reports whether v is major.minor or newer.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}
