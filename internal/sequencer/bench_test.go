package sequencer

import (
	"bytes"
	"context"
	"fmt"
	"testing"
)

// BenchmarkRound measures one sequencing round of 1,000 entries of realistic
// size (2 KiB certificates) on local storage and the embedded database:
// hashing, tile encoding, gzip, storage writes, checkpoint signing and the
// lock compare-and-swap. Reported per entry.
func BenchmarkRound(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	cfg := e.config(b)
	if err := Create(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	s, err := Load(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	const perRound = 1000
	cert := bytes.Repeat([]byte{0x42}, 2048)
	b.ResetTimer()
	n := 0
	for b.Loop() {
		batch := make([]*waiter, perRound)
		for i := range batch {
			p := pending(n)
			p.Entry.Certificate = append(fmt.Appendf(nil, "%d", n), cert...)
			batch[i] = &waiter{p: p, done: make(chan struct{})}
			n++
		}
		if err := s.sequence(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n)/1000, "µs/entry")
}
