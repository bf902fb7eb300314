package ctlog

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
)

// TestAdmitClientUnderPressure: Log.AdmitClient takes the log's pressure
// from its real count of submissions in flight (the one AddChain keeps):
// with Pressure of them in flight, a client's add-chain beyond its share
// is refused while its add-pre-chain is admitted; once they are answered,
// add-chain is admitted again.
func TestAdmitClientUnderPressure(t *testing.T) {
	l := &Log{ClientLimits: netlimit.NewClientLimiter(netlimit.ClientLimitConfig{Rate: 100, Burst: 100, AddChainShare: 0.02, Pressure: 3, Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }})}
	a := netip.MustParseAddr("192.0.2.1")
	var done []func()
	for range 3 {
		d, err := l.enter(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		done = append(done, d)
	}
	for i := range 2 { // the add-chain share's burst: 2% of 100
		if err := l.AdmitClient(a, false); err != nil {
			t.Fatalf("add-chain %d within its share: %v", i, err)
		}
	}
	var te *netlimit.ThrottleError
	if !errors.As(l.AdmitClient(a, false), &te) || te.Reason != netlimit.ReasonClientAddChain {
		t.Fatalf("add-chain beyond its share under pressure: %v, want a client_add_chain refusal", te)
	}
	for i := range 10 {
		if err := l.AdmitClient(a, true); err != nil {
			t.Fatalf("add-pre-chain %d under pressure: %v", i, err)
		}
	}
	for _, d := range done {
		d()
	}
	if err := l.AdmitClient(a, false); err != nil {
		t.Fatalf("add-chain once the pressure is gone: %v", err)
	}
}
