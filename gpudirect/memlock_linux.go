package gpudirect

import "golang.org/x/sys/unix"

// callerMemlockLimit is this process's RLIMIT_MEMLOCK soft limit.
func callerMemlockLimit() (uint64, error) {
	var limit unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &limit); err != nil {
		return 0, err
	}
	if limit.Cur == unix.RLIM_INFINITY {
		return MemlockUnlimited, nil
	}
	return limit.Cur, nil
}
