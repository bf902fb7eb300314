package hammer

import (
	"context"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/testkit/fakelog"
)

// TestFutureSCTs: against a log whose clock is 300 s fast, every new SCT
// is a future_timestamp verification failure and the report gives the
// lead; against an honest log, none is, and the lead is about zero.
func TestFutureSCTs(t *testing.T) {
	for _, skew := range []time.Duration{300 * time.Second, 0} {
		_, c := startFake(t, fakelog.Options{Now: func() time.Time { return time.Now().Add(skew) }})
		r, _ := Run(context.Background(), Config{
			Client: c, Root: testRoot(t), Count: 40, Workers: 4, Premint: 10,
			Poll: 10 * time.Millisecond, VerifyDelay: 20 * time.Millisecond, Drain: 20 * time.Second,
		})
		if r.MaxSCTLeadMS == nil {
			t.Fatalf("skew %v: no max_sct_lead_ms in the report", skew)
		}
		lead := time.Duration(*r.MaxSCTLeadMS) * time.Millisecond
		future := r.VerificationFailuresByKind[FailFutureTimestamp]
		t.Logf("skew %v: max SCT lead %v, %d future_timestamp failures of %d accepted, result %s", skew, lead, future, r.Accepted, r.Result)
		if skew > 0 {
			if future != r.Accepted || r.Accepted == 0 || lead < skew-time.Second || lead > skew || r.Result != ResultVerification {
				t.Errorf("skew %v: %d future_timestamp failures of %d accepted, lead %v, result %s", skew, future, r.Accepted, lead, r.Result)
			}
		} else if future != 0 || lead > maxSCTLead || r.VerificationFailures != 0 {
			t.Errorf("honest log: %d future_timestamp failures, lead %v, %d failures: %v", future, lead, r.VerificationFailures, r.FailureExamples)
		}
	}
}
