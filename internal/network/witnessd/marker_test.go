package witnessd

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
)

// startOn builds a witness of lg on store (of kind), with other as the
// other backend (nil: none), adopting refused stores if adopt.
func startOn(t *testing.T, lg *testLog, store Store, kind string, other Store, otherKind string, adopt bool) (*Witness, error) {
	t.Helper()
	return New(context.Background(), Config{Name: witnessName, Keys: witnessKeys(t), Logs: []Log{{Origin: lg.origin, Keys: []string{lg.vkey}}},
		Store: store, StoreKind: kind, Other: other, OtherKind: otherKind, AdoptStore: adopt})
}

// TestStoreSwitchRefused (issue 33 §3): a witness whose state is in the
// embedded database is started with PostgreSQL added to its config (a
// standby being set up): PostgreSQL's store is empty while the embedded
// database holds the witness's state, so it refuses to start, naming the
// field that overrides it; started anyway (adopt_state_store), it marks
// the embedded database as no longer holding its state, and going back to
// it (PostgreSQL removed) is refused too. Before, each switch started the
// witness from an empty store, and it cosigned a fork from size 0.
func TestStoreSwitchRefused(t *testing.T) {
	lg := newTestLog(t, testOrigin)
	embedded := boltStore(t)
	pg := pgStore(t, testenv.Postgres(t))
	tr := newTree(t, 10, -1)
	fork := newTree(t, 10, 2)

	w, err := startOn(t, lg, embedded, StoreDatabase, nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if r := post(w.Handler(prefix), body(0, nil, lg.sign(t, 10, tr.root(t, 10)))); r.code != 200 {
		t.Fatalf("add-checkpoint: %d %s", r.code, r.body)
	}

	// postgres added: refused.
	_, err = startOn(t, lg, pg, StorePostgres, embedded, StoreDatabase, false)
	if err == nil || !strings.Contains(err.Error(), "PostgreSQL (postgres) holds no witness state") || !strings.Contains(err.Error(), "witness.adopt_state_store") {
		t.Fatalf("a witness moved to an empty PostgreSQL while the embedded database holds its state: %v, want a refusal naming witness.adopt_state_store", err)
	}
	// Adopted on purpose: it starts from nothing (the operator said so)...
	w, err = startOn(t, lg, pg, StorePostgres, embedded, StoreDatabase, true)
	if err != nil {
		t.Fatalf("with adopt_state_store: %v", err)
	}
	if r := post(w.Handler(prefix), body(0, nil, lg.sign(t, 10, fork.root(t, 10)))); r.code != 200 {
		t.Fatalf("add-checkpoint on the adopted store: %d %s", r.code, r.body)
	}
	// ...and is at home there from then on, without the setting.
	if _, err := startOn(t, lg, pg, StorePostgres, embedded, StoreDatabase, false); err != nil {
		t.Fatalf("restarting on the adopted store: %v", err)
	}
	// postgres removed again: the embedded database says the state moved.
	_, err = startOn(t, lg, embedded, StoreDatabase, nil, "", false)
	if err == nil || !strings.Contains(err.Error(), "kept the witness's state in PostgreSQL") {
		t.Fatalf("going back to the embedded database: %v, want a refusal saying the state is in PostgreSQL", err)
	}
}

// TestStoreLost (issue 33 §3): PostgreSQL holds the state and the embedded
// database was marked as not holding it; a PostgreSQL that comes back
// empty (a new database, a dropped schema) is refused: the other store
// says the state moved there.
func TestStoreLost(t *testing.T) {
	lg := newTestLog(t, testOrigin)
	embedded := boltStore(t)
	w, err := startOn(t, lg, pgStore(t, testenv.Postgres(t)), StorePostgres, embedded, StoreDatabase, false)
	if err != nil {
		t.Fatal(err)
	}
	tr := newTree(t, 5, -1)
	if r := post(w.Handler(prefix), body(0, nil, lg.sign(t, 5, tr.root(t, 5)))); r.code != 200 {
		t.Fatalf("add-checkpoint: %d %s", r.code, r.body)
	}
	_, err = startOn(t, lg, pgStore(t, testenv.Postgres(t)), StorePostgres, embedded, StoreDatabase, false)
	if err == nil || !strings.Contains(err.Error(), "was moved here: it was lost or replaced") {
		t.Fatalf("an empty PostgreSQL where the state was: %v, want a refusal", err)
	}
}

// TestStoreOfAnotherWitness (issue 33 §3): a store marked with another
// witness's name and key is refused (one store, one witness); a store
// with states and no marker (written before markers) is taken as this
// witness's and marked.
func TestStoreOfAnotherWitness(t *testing.T) {
	lg := newTestLog(t, testOrigin)
	store := boltStore(t)
	other, err := keys.CosignerFromSeed(bytes.Repeat([]byte{9}, keys.SeedSize), "witness")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), Config{Name: "witness.example/other", Keys: other, Store: store,
		Logs: []Log{{Origin: lg.origin, Keys: []string{lg.vkey}}}}); err != nil {
		t.Fatal(err)
	}
	_, err = startOn(t, lg, store, StoreDatabase, nil, "", false)
	if err == nil || !strings.Contains(err.Error(), `holds the state of witness "witness.example/other"`) {
		t.Fatalf("another witness's store: %v, want a refusal", err)
	}

	legacy := boltStore(t)
	tr := newTree(t, 3, -1)
	if err := legacy.UpdateWitnessState(context.Background(), StateKey(lg.origin), func([]byte) ([]byte, error) {
		return state{size: 3, hash: tr.root(t, 3)}.encode(), nil
	}); err != nil {
		t.Fatal(err)
	}
	w, err := startOn(t, lg, legacy, StoreDatabase, nil, "", false)
	if err != nil {
		t.Fatalf("a store from before markers: %v", err)
	}
	if m, _ := legacy.WitnessMarker(context.Background()); CheckMarker(m, witnessName, w.VerifierKeys()) != nil || m == nil {
		t.Fatalf("the store was not marked as this witness's: %q", m)
	}
}

// TestOtherKeysRefused (issue 33 §3): a log list gave a log's origin to an
// impostor's key, and the witness cosigned the impostor's checkpoints.
// Once the config names the genuine key, the witness refuses the log with a
// 403 saying why (not a 409 or 422 the genuine log cannot act on), until its
// operator resets the log's state; then the genuine log's checkpoints are
// cosigned. A key added beside the one the state was cosigned under is no
// refusal.
func TestOtherKeysRefused(t *testing.T) {
	impostor := newTestLog(t, testOrigin)
	genuine := newTestLog(t, testOrigin)
	store := boltStore(t)
	w := newWitness(t, store, impostor)
	tr := newTree(t, 20, -1)
	if r := post(w.Handler(prefix), body(0, nil, impostor.sign(t, 20, tr.root(t, 20)))); r.code != 200 {
		t.Fatalf("the impostor's checkpoint: %d %s", r.code, r.body)
	}

	// A key added: still this log's state.
	w2, err := New(context.Background(), Config{Name: witnessName, Keys: witnessKeys(t), Store: store,
		Logs: []Log{{Origin: impostor.origin, Keys: []string{impostor.vkey, genuine.vkey}}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := post(w2.Handler(prefix), body(20, nil, impostor.sign(t, 20, tr.root(t, 20)))); r.code != 200 {
		t.Fatalf("with a key added: %d %s", r.code, r.body)
	}

	// Only the genuine key: refused, whatever the request.
	w3 := newWitness(t, store, genuine)
	h := w3.Handler(prefix)
	genuineTree := newTree(t, 7, 0)
	for _, b := range [][]byte{body(0, nil, genuine.sign(t, 7, genuineTree.root(t, 7))), body(20, nil, genuine.sign(t, 20, tr.root(t, 20)))} {
		if r := post(h, b); r.code != http.StatusForbidden || !strings.Contains(r.body, "cosigned under other keys") {
			t.Fatalf("the genuine log after the impostor's state: %d %q, want 403 naming the keys", r.code, r.body)
		}
	}
	// The documented reset, then the genuine log from size 0.
	size, existed, err := ResetLog(context.Background(), store, genuine.origin)
	if err != nil || !existed || size != 20 {
		t.Fatalf("ResetLog: %d %v %v", size, existed, err)
	}
	if r := post(h, body(0, nil, genuine.sign(t, 7, genuineTree.root(t, 7)))); r.code != 200 {
		t.Fatalf("the genuine log after the reset: %d %s", r.code, r.body)
	}
}

// TestCheckRestore (issue 33 §3): a backup whose witness state is older
// than the live one (a smaller tree, a missing log, another tree of the
// same size) is refused; one as new or newer is not.
func TestCheckRestore(t *testing.T) {
	a, b := newTree(t, 30, -1), newTree(t, 30, 4)
	enc := func(tr *testTree, n int64) []byte { return state{size: n, hash: tr.root(t, n)}.encode() }
	k1, k2 := StateKey("example.com/1"), StateKey("example.com/2")
	live := map[[32]byte][]byte{k1: enc(a, 20), k2: enc(a, 10)}
	names := map[[32]byte]string{k1: "example.com/1"}
	for _, tc := range []struct {
		backup map[[32]byte][]byte
		want   string
	}{
		{map[[32]byte][]byte{k1: enc(a, 20), k2: enc(a, 10)}, ""},
		{map[[32]byte][]byte{k1: enc(a, 25), k2: enc(a, 10)}, ""},
		{map[[32]byte][]byte{k1: enc(a, 15), k2: enc(a, 10)}, "example.com/1 (tree size 15) is older than the live one (tree size 20)"},
		{map[[32]byte][]byte{k1: enc(a, 20)}, "has no witness state of log with origin hash"},
		{map[[32]byte][]byte{k1: enc(b, 20), k2: enc(a, 10)}, "another tree of the same size"},
	} {
		err := CheckRestore(live, tc.backup, names)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckRestore: %v, want %q", err, tc.want)
		}
	}
}
