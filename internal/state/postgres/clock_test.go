package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/clock"
)

// TestClockSkew checks this process's clock, skewed by the test, against a
// real PostgreSQL's (on this host, so in step with the unskewed clock): a
// clock 300 s or 2 s off either way is refused, one in step is not, and
// the measured skew is the test's to within the round trip.
func TestClockSkew(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	for _, tc := range []struct {
		skew   time.Duration
		reason string
	}{
		{0, ""},
		{300 * time.Second, "ahead"},
		{2 * time.Second, "ahead"},
		{-2 * time.Second, "behind"},
		{-300 * time.Second, "behind"},
	} {
		c := clock.Skewed{Skew: tc.skew}
		r := clock.NewReference(c, db, time.Minute, nil)
		m, err := r.Measure(ctx)
		var se *clock.SkewError
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("skew %v: Measure: %v", tc.skew, err)
		case tc.reason != "" && (!errors.As(err, &se) || se.Reason != tc.reason):
			t.Errorf("skew %v: Measure: %v, want a %q SkewError", tc.skew, err, tc.reason)
		}
		if d := m.Skew() - tc.skew; d.Abs() > m.Uncertainty()+50*time.Millisecond {
			t.Errorf("skew %v: measured %v ± %v", tc.skew, m.Skew(), m.Uncertainty())
		}
		t.Logf("skew %v: measured %v ± %v: %v", tc.skew, m.Skew(), m.Uncertainty(), err)
		// What the sequencer asks before it signs: a timestamp from
		// this clock.
		err = r.Check(ctx, c.Now())
		if (tc.reason == "") != (err == nil) {
			t.Errorf("skew %v: Check: %v", tc.skew, err)
		}
	}
}
