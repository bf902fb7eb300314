package witnessd

import (
	"testing"
)

// BenchmarkAddCheckpoint measures add-checkpoint requests served by the
// handler with the embedded database (each a durable, fsynced update),
// from concurrent clients: each request re-submits the cosigned
// checkpoint (old size = its size), which takes the whole path: parsing,
// the log's Ed25519 signature, the state read, both cosignatures
// (Ed25519 and ML-DSA-44) and the compare-and-swap.
//
//	go test -run '^$' -bench AddCheckpoint -count 6 ./internal/network/witnessd/ | benchstat -
func BenchmarkAddCheckpoint(b *testing.B) {
	lg := newTestLog(b, testOrigin)
	w := newWitness(b, boltStore(b), lg)
	h := w.Handler(prefix)
	tr := newTree(b, 1000, -1)
	signed := lg.sign(b, 1000, tr.root(b, 1000))
	if r := post(h, body(0, nil, signed)); r.code != 200 {
		b.Fatalf("%d %s", r.code, r.body)
	}
	req := body(1000, nil, signed)
	// Sixteen clients per CPU: many logs asking at once.
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if r := post(h, req); r.code != 200 {
				b.Errorf("%d %s", r.code, r.body)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
}
