// Package buildinfo says which build of Mosaic is running: the main
// module's version, the VCS commit it was built from and the Go version,
// read from the build information the Go toolchain embeds in the binary.
// `mosaic version`, the mosaic_build_info metric and the tools'
// User-Agent (package client) all use it, so they always agree.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Module is Mosaic's module path, which names the software in the
// operator metadata each log publishes (log_software.name).
const Module = "github.com/mosaic-ct/mosaic"

// Info describes a build.
type Info struct {
	// Version is the main module's version ("v1.2.3", or a pseudo-version),
	// or "devel" for a build from a working tree without one.
	Version string
	// GoVersion is the Go toolchain that built the binary ("go1.26.0").
	GoVersion string
	// Commit is the VCS revision the binary was built from, or "unknown"
	// (go run, a build outside a repository, -buildvcs=false).
	Commit string
	// Modified reports that the working tree had uncommitted changes.
	Modified bool
}

// Read returns the running binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "devel", GoVersion: runtime.Version(), Commit: "unknown"}
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Version: "devel", GoVersion: bi.GoVersion, Commit: "unknown"}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		info.Version = v
	}
	if info.GoVersion == "" {
		info.GoVersion = runtime.Version()
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if s.Value != "" {
				info.Commit = s.Value
			}
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// Version returns the main module's version, or "devel".
func Version() string { return Read().Version }

// String describes the build on one line, as `mosaic version` prints it:
// "mosaic v1.2.3 (commit 0123abcd…, modified) go1.26.0".
func (i Info) String() string {
	commit := i.Commit
	if i.Modified {
		commit += ", modified"
	}
	return "mosaic " + i.Version + " (commit " + commit + ") " + i.GoVersion
}
