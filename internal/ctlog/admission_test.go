package ctlog

import (
	"errors"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/chain"
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
	var te *ThrottleError
	if !errors.As(err, &te) || te.Reason != ReasonOldRateLimit {
		t.Fatalf("third old submission: %v, want a %s ThrottleError", err, ReasonOldRateLimit)
	}
	if _, release, err := a.admit(&chain.Entry{NotBefore: now}); err != nil {
		t.Errorf("a fresh submission was rate-limited: %v", err)
	} else {
		release()
	}
}

func TestAdmissionPerIssuer(t *testing.T) {
	now := time.Now()
	a := NewAdmission(AdmissionConfig{OldAge: time.Hour, PerIssuer: 3, PerIssuerLow: 1, PoolSize: 4})
	x, y := [32]byte{1}, [32]byte{2}
	fresh := func(issuer [32]byte) *chain.Entry { return &chain.Entry{IssuerID: issuer, NotBefore: now} }
	old := func(issuer [32]byte) *chain.Entry {
		return &chain.Entry{IssuerID: issuer, NotBefore: now.Add(-2 * time.Hour)}
	}
	var releases []func()
	for range 3 {
		_, r, err := a.admit(fresh(x))
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, r)
	}
	// Three of x's submissions wait, and the pool (4) is not contended:
	// x may take a fourth.
	_, spare, err := a.admit(fresh(x))
	if err != nil {
		t.Fatalf("an issuer over its share while the log has room: %v", err)
	}
	spare()
	// With y's submission waiting too the log is contended: x is refused.
	_, ry, err := a.admit(fresh(y))
	if err != nil {
		t.Fatal(err)
	}
	var te *ThrottleError
	if _, _, err := a.admit(fresh(x)); !errors.As(err, &te) || te.Reason != ReasonIssuerShare {
		t.Fatalf("issuer over its share: %v", err)
	}
	// Another issuer, and the same issuer's low-priority class, are
	// counted apart.
	if _, r, err := a.admit(fresh(y)); err != nil {
		t.Errorf("another issuer was refused: %v", err)
	} else {
		r()
	}
	_, rLow, err := a.admit(old(x))
	if err != nil {
		t.Errorf("the issuer's first old submission was refused: %v", err)
	}
	if _, _, err := a.admit(old(x)); !errors.As(err, &te) {
		t.Errorf("the issuer's second old submission: %v, want refused (PerIssuerLow 1)", err)
	}
	rLow()
	releases[0]()
	releases[0]() // releasing twice frees one place only
	_, held, err := a.admit(fresh(x))
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if _, _, err := a.admit(fresh(x)); !errors.As(err, &te) {
		t.Errorf("a double release freed two places: %v", err)
	}
	for _, r := range append(releases[1:], held, ry) {
		r()
	}
	a.mu.Lock()
	n := len(a.waiting)
	a.mu.Unlock()
	if n != 0 {
		t.Errorf("%d issuer classes still counted after every release", n)
	}
}
