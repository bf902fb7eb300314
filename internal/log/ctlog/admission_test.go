package ctlog

import (
	"errors"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/log/chain"
)

func TestAdmissionPriority(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a := NewAdmission(AdmissionConfig{OldAge: 48 * time.Hour, EmbeddedSCTsLowPriority: true, Now: func() time.Time { return now }})
	for _, tc := range []struct {
		name string
		e    chain.Entry
		low  bool
	}{
		{"fresh precertificate", chain.Entry{IsPrecert: true, NotBefore: now.Add(-time.Hour)}, false},
		{"precertificate 47h old", chain.Entry{IsPrecert: true, NotBefore: now.Add(-47 * time.Hour)}, false},
		{"precertificate 49h old", chain.Entry{IsPrecert: true, NotBefore: now.Add(-49 * time.Hour)}, true},
		{"old final certificate", chain.Entry{NotBefore: now.Add(-30 * 24 * time.Hour)}, true},
		{"fresh certificate with SCTs", chain.Entry{NotBefore: now.Add(-time.Hour), HasSCTList: true}, true},
		{"fresh certificate without SCTs", chain.Entry{NotBefore: now.Add(-time.Hour)}, false},
	} {
		low, release, err := a.admit(&tc.e)
		if err != nil || low != tc.low {
			t.Errorf("%s: low %v, %v; want low %v", tc.name, low, err, tc.low)
		}
		if release != nil {
			release()
		}
	}
	off := NewAdmission(AdmissionConfig{Now: func() time.Time { return now }})
	if low, _, _ := off.admit(&chain.Entry{NotBefore: now.AddDate(-1, 0, 0), HasSCTList: true}); low {
		t.Error("with the rules off, an old certificate with SCTs was low priority")
	}
}

func TestAdmissionOldRateLimit(t *testing.T) {
	now := time.Now()
	a := NewAdmission(AdmissionConfig{OldAge: time.Hour, OldRateLimit: 0.001, OldRateBurst: 2})
	old := &chain.Entry{NotBefore: now.Add(-2 * time.Hour)}
	for i := range 2 {
		if _, release, err := a.admit(old); err != nil {
			t.Fatalf("old submission %d within the burst: %v", i, err)
		} else {
			release()
		}
	}
	_, _, err := a.admit(old)
	var te *netlimit.ThrottleError
	if !errors.As(err, &te) || te.Reason != ReasonOldRateLimit {
		t.Fatalf("third old submission: %v, want a %s netlimit.ThrottleError", err, ReasonOldRateLimit)
	}
	if _, release, err := a.admit(&chain.Entry{NotBefore: now}); err != nil {
		t.Errorf("a fresh submission was rate-limited: %v", err)
	} else {
		release()
	}
}

func TestAdmissionPerIssuer(t *testing.T) {
	now := time.Now()
	a := NewAdmission(AdmissionConfig{OldAge: time.Hour, PerIssuerShare: 0.5, PoolSize: 6})
	x, y := [32]byte{1}, [32]byte{2}
	fresh := func(issuer [32]byte) *chain.Entry { return &chain.Entry{IssuerID: issuer, NotBefore: now} }
	old := func(issuer [32]byte) *chain.Entry {
		return &chain.Entry{IssuerID: issuer, NotBefore: now.Add(-2 * time.Hour)}
	}
	var held []func()
	admit := func(e *chain.Entry) error {
		_, r, err := a.admit(e)
		if err == nil {
			held = append(held, r)
		}
		return err
	}
	var te *netlimit.ThrottleError
	// One issuer alone is never refused for its share, whatever the load:
	// there is no one to be fair to.
	for i := range 8 {
		if err := admit(fresh(x)); err != nil {
			t.Fatalf("the only issuer, submission %d: %v", i, err)
		}
	}
	// y arrives: 9 waiting (contended, pool 6). x holds 8 of 9 normal
	// submissions, far over half: refused; y is not.
	if err := admit(fresh(y)); err != nil {
		t.Fatalf("a second issuer: %v", err)
	}
	if err := admit(fresh(x)); !errors.As(err, &te) || te.Reason != ReasonIssuerShare {
		t.Fatalf("issuer over its share of a contended log: %v", err)
	}
	if err := admit(fresh(y)); err != nil {
		t.Errorf("the issuer under its share was refused: %v", err)
	}
	// x's low-priority submissions are counted apart: x's first old one
	// is alone in its class.
	if err := admit(old(x)); err != nil {
		t.Errorf("x's first old submission: %v", err)
	}
	// Releasing everything leaves no state behind, and an uncontended log
	// refuses no one.
	for _, r := range held {
		r()
		r() // a second release is a no-op
	}
	a.mu.Lock()
	n, c0, c1 := len(a.waiting), a.classTotal[0], a.classTotal[1]
	a.mu.Unlock()
	if n != 0 || c0 != 0 || c1 != 0 {
		t.Errorf("after every release: %d issuer classes, totals %d/%d", n, c0, c1)
	}
	held = nil
	for range 3 {
		if err := admit(fresh(x)); err != nil {
			t.Fatalf("uncontended: %v", err)
		}
	}
	if err := admit(fresh(y)); err != nil {
		t.Fatalf("uncontended: %v", err)
	}
	if err := admit(fresh(x)); err != nil {
		t.Errorf("x at 4 of 5 waiting, pool 6 not reached: %v", err)
	}
}
