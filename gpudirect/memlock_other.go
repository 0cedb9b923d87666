//go:build !linux

package gpudirect

import "errors"

// callerMemlockLimit has nothing to read: grdma checks Linux nodes.
func callerMemlockLimit() (uint64, error) {
	return 0, errors.New("RLIMIT_MEMLOCK is read on Linux only")
}
