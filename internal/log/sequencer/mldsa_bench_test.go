package sequencer

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
)

// BenchmarkRoundCheckpointSigners is the end-to-end cost of a round (tiles,
// staging bundle, fence, commit, publish, on local storage and the
// embedded database) with the checkpoint signatures before ML-DSA-44
// (RFC 6962 + Ed25519) and with it, for a round of one entry (where the
// signature's fixed cost shows most) and of 1,000. Run with -count to get
// alternating pairs on a noisy machine; cpu-ns/round is the process's
// CPU time per round.
func BenchmarkRoundCheckpointSigners(b *testing.B) {
	for _, perRound := range []int{1, 1000} {
		for _, withMLDSA := range []bool{false, true} {
			name := fmt.Sprintf("entries=%d/rfc6962+ed25519", perRound)
			if withMLDSA {
				name += "+mldsa44"
			}
			b.Run(name, func(b *testing.B) {
				e := newEnv(b)
				ctx := context.Background()
				cfg := e.config(b)
				if withMLDSA {
					cfg.Signer = checkpoint.NewSigner(origin, e.k.ECDSA, e.k.LogID(), e.k.Ed25519,
						checkpoint.NewMLDSA44Signer(origin, e.k.MLDSA44))
				}
				if err := Create(ctx, cfg); err != nil {
					b.Fatal(err)
				}
				s, err := Load(ctx, cfg)
				if err != nil {
					b.Fatal(err)
				}
				cpu := cpuNow(b)
				sequenceRounds(ctx, b, s, perRound)
				b.ReportMetric(float64((cpuNow(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/round")
			})
		}
	}
}

// cpuNow returns the process's CPU time (user + system): on a shared
// machine a round's wall time includes waiting for a core, its CPU time
// does not.
func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
