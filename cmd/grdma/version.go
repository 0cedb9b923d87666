package main

import "runtime/debug"

// A binary built by `make build` has its version and commit set with
// -ldflags -X. One built by `go install` (or go build) has not: it takes
// them from the build information the go command records, the module
// version for `go install github.com/grdma/grdma/cmd/grdma@VERSION`, the
// VCS revision for a build in a git checkout.
//
// It runs only for -V: start-up does no work it does not need.
func versionString() string {
	v, c := version, commit
	if info, ok := debug.ReadBuildInfo(); ok {
		v, c = buildVersion(v, c, info)
	}
	return "grdma " + v + " (commit " + c + ")"
}

// buildVersion fills in the "dev" version and "unknown" commit from info.
func buildVersion(version, commit string, info *debug.BuildInfo) (string, string) {
	if version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		version = info.Main.Version
	}
	if commit == "unknown" {
		var rev string
		dirty := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			commit = rev
			if dirty {
				commit += "-dirty"
			}
		}
	}
	return version, commit
}
