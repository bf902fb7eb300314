//go:build !unix

package bolt

import "time"

// processCPU is not measured on this system: cpu-µs/entry reads 0.
func processCPU() time.Duration { return 0 }
