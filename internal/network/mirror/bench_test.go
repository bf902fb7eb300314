package mirror

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
)

// benchEntries is the size of the log the catch-up benchmarks copy
// (MOSAIC_MIRROR_BENCH_ENTRIES, default 100000).
func benchEntries(b *testing.B) int {
	n := 100000
	if s := os.Getenv("MOSAIC_MIRROR_BENCH_ENTRIES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			b.Fatalf("MOSAIC_MIRROR_BENCH_ENTRIES=%q is not a positive number", s)
		}
	}
	return n
}

// benchLog is a Static CT log of n entries the size of real ones (a
// 1,200-byte certificate and two chain fingerprints, about 1.3 kB as a
// TileLeaf). Benchmarks using b.Loop run their function once, so it is
// written once per benchmark.
func benchLog(b *testing.B, n int) *testLog {
	l := newTestLog(b, StaticCT)
	cert := make([]byte, 1200)
	rand.Read(cert)
	l.makeEntry = func(i int) []byte {
		return tile.AppendTileLeaf(nil, &tile.Entry{Timestamp: uint64(1700000000000 + i), Certificate: cert,
			ChainFingerprints: issuerFPs, LeafIndex: uint64(i)})
	}
	l.grow(n)
	return l
}

// BenchmarkCatchUpPush measures a mirror catching up a log from nothing
// through add-checkpoint and add-entries over loopback HTTP (gzip bodies,
// 32 packages a request), as a Mosaic log pushes: entries/s counts both
// sides, the log's proofs and the mirror's verification and durable
// writes (local directory, fsync per object).
func BenchmarkCatchUpPush(b *testing.B) {
	n := benchEntries(b)
	l := benchLog(b, n)
	signed := l.grow(0)
	cp, _ := l.verify(signed)
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		tm := newTestMirror(b, b.TempDir(), l.mirrorLog())
		p := l.pusher(b, tm)
		p.cfg.Timeout = time.Hour
		b.StartTimer()
		start := time.Now()
		if err := p.push(context.Background(), p.targets[0], signed, cp); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(n)*float64(b.N)/total.Seconds(), "entries/s")
}

// BenchmarkCatchUpPull measures a mirror in pull mode copying the log from
// its monitoring prefix (served over loopback HTTP from its directory).
func BenchmarkCatchUpPull(b *testing.B) {
	n := benchEntries(b)
	l := benchLog(b, n)
	l.grow(0)
	srv := httptest.NewServer(http.FileServer(http.Dir(l.dir)))
	defer srv.Close()
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		ml := l.mirrorLog()
		ml.Pull = srv.URL + "/"
		tm := newTestMirror(b, b.TempDir(), ml)
		b.StartTimer()
		start := time.Now()
		size, err := tm.m.CatchUp(context.Background(), l.origin)
		if err != nil || size != int64(n) {
			b.Fatalf("caught up to %d, want %d: %v", size, n, err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(n)*float64(b.N)/total.Seconds(), "entries/s")
}
