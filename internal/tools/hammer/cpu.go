package hammer

import (
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/procs"
)

// processCPU returns the CPU time (user + system) this process has used, 0
// where it is not measured.
func processCPU() time.Duration {
	d, _ := procs.CPUTime()
	return d
}
