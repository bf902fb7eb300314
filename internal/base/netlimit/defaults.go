package netlimit

import "fmt"

// FileLimit is the process's RLIMIT_NOFILE: Soft is in force, Hard is the
// ceiling, Before is the soft limit before RaiseFileLimit. Zero means
// unknown.
type FileLimit struct {
	Soft, Hard, Before uint64
}

// Bounds of the default caps.
const (
	// assumedFileLimit stands in for an unknown file limit.
	assumedFileLimit = 4096
	// maxDefault bounds the default global cap: each connection costs
	// memory (a goroutine, buffers, TLS state: tens of KiB), and past this
	// many an operator should choose the number deliberately.
	maxDefault = 65536
	// maxDefaultPerClient is the default per-client cap when the global one
	// allows it: far above what a busy CA's submission pool or a monitor
	// needs, far below what starves anyone.
	maxDefaultPerClient = 1024
	// minConnections is the smallest global cap a process can usefully
	// serve with.
	minConnections = 16
)

// Defaults returns the default global and per-client caps for a process
// whose soft file limit is fileLimit (0: unknown), keeping reserve file
// descriptors for storage and databases.
//
// Connections get three quarters of the limit, less the reserve and the
// MaxRefusing descriptors refusals may hold: the remaining quarter is for
// what connections open on their behalf (a read-path request opens a tile
// file or an S3 connection). The global cap is at most 65536; the
// per-client cap is a quarter of it, at most 1024.
func Defaults(fileLimit uint64, reserve int) (global, perClient int, err error) {
	if fileLimit == 0 {
		fileLimit = assumedFileLimit
	}
	fileLimit = min(fileLimit, 1<<30) // RLIM_INFINITY and the like
	g := int64(fileLimit)*3/4 - int64(reserve) - MaxRefusing
	if g < minConnections {
		return 0, 0, fmt.Errorf("the file descriptor limit (RLIMIT_NOFILE) is %d: too low to serve connections while keeping %d for storage and databases; "+
			"raise it (for example LimitNOFILE=65536 in the systemd unit, or ulimit -n) or set limits.max_connections", fileLimit, int64(reserve)+MaxRefusing)
	}
	global = int(min(g, maxDefault))
	return global, DefaultPerClient(global), nil
}

// DefaultPerClient returns the default per-client cap for a global cap: a
// quarter of it, at most 1024.
func DefaultPerClient(global int) int {
	return max(1, min(global/4, maxDefaultPerClient))
}
