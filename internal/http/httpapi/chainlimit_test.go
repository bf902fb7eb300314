package httpapi

import (
	"bytes"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// emptyStringsBody is an add-chain body of n empty strings, {"chain":
// ["","",…]}, plus tail before the closing brace (`,"x":1` sends it
// through encoding/json instead of the fast parser).
func emptyStringsBody(n int, tail string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"chain":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`""`)
	}
	b.WriteString("]" + tail + "}")
	return b.Bytes()
}

// emptyStringsCount is how many empty strings fit in a body just under
// MaxBodyBytes.
const emptyStringsCount = (MaxBodyBytes - 32) / 3

// TestLongChainBoundedAllocation: a body of the largest size the log
// reads, holding as many (empty) certificates as fit, is refused with a
// 400 that says the chain is too long, and parsing it allocates a small
// multiple of the body, not a slice entry per certificate (about 24 MB
// before parsing stopped at the maximum chain length plus one). This is a
// memory bound, measured in bytes allocated, not a timing.
func TestLongChainBoundedAllocation(t *testing.T) {
	f := newSubmitFixture(t)
	for _, tc := range []struct{ name, tail string }{
		{"fast parser", ""},
		{"encoding/json", `,"x":1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := emptyStringsBody(emptyStringsCount, tc.tail)
			if len(body) > MaxBodyBytes {
				t.Fatalf("test body is %d bytes, over MaxBodyBytes", len(body))
			}
			code, out := f.post(false, body) // warm up pools
			if code != http.StatusBadRequest || !strings.Contains(string(out), "at most 10") {
				t.Fatalf("status %d %q, want 400 saying the log accepts at most 10 certificates", code, out)
			}
			if err := checkReason(out); err != nil {
				t.Errorf("reason is not one plain sentence: %v", err)
			}
			const runs = 5
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range runs {
				f.post(false, body)
			}
			runtime.ReadMemStats(&after)
			perRun := (after.TotalAlloc - before.TotalAlloc) / runs
			// Reading the body into memory costs about twice its size
			// (the buffer grows by doubling), and httptest's request and
			// recorder a little more; 4 MiB leaves a wide margin and is
			// still a sixth of what a per-certificate parse allocates.
			if limit := uint64(4 << 20); perRun > limit {
				t.Errorf("a %d-byte body of %d empty certificates allocated %d bytes per request, want at most %d",
					len(body), emptyStringsCount, perRun, limit)
			}
			t.Logf("%d bytes allocated per request", perRun)
		})
	}
}

// BenchmarkLongChain measures what the add-chain handler allocates for a
// 512 KiB body of empty strings (go test -bench LongChain -benchmem).
func BenchmarkLongChain(b *testing.B) {
	f := newSubmitFixture(b)
	for _, tc := range []struct{ name, tail string }{
		{"fast", ""},
		{"json", `,"x":1`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body := emptyStringsBody(emptyStringsCount, tc.tail)
			b.ReportAllocs()
			for b.Loop() {
				if code, out := f.post(false, body); code != http.StatusBadRequest {
					b.Fatalf("%d %s", code, out)
				}
			}
		})
	}
}
