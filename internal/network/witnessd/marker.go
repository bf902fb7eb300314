package witnessd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// The witness's no-fork promise holds only while its state never goes
// back: a store that starts empty, or from an older copy, lets it cosign
// a checkpoint proved from a size it once passed, a fork of what it
// cosigned included. Two operator actions did exactly that without a
// word: adding PostgreSQL (to run a standby) or removing it moves the
// witness to the other backend, which starts empty; and a restored or
// rolled-back embedded database holds an older state.
//
// So each store carries a marker: the witness it belongs to (name and a
// hash of its keys) and which backend holds the witness's state ("home").
// At startup (checkStores) the witness refuses, unless the operator says
// otherwise (Config.AdoptStore, witness.adopt_state_store):
//
//   - a store whose marker says the state moved to the other backend: an
//     earlier run kept the state there, so this one is older;
//   - a store whose marker names another witness (a store is one
//     witness's, or the states of two would mix);
//   - an empty store (no marker, no state) when the other backend, if the
//     config names one, holds witness state, or says the state moved here
//     (so this store was lost or replaced).
//
// It then writes its marker into the store it uses, and marks the other
// backend, if it can reach it, as not home, so that going back to it later
// is refused too. What is not caught: removing PostgreSQL from the config
// when no embedded database was configured while it was used (nothing
// then knew where the state had been), and a store replaced by an older
// copy of itself (mosaic restore refuses that for the embedded database,
// see package server; with PostgreSQL it is the database's backups).

// Store kinds, as the marker and messages name them.
const (
	StoreDatabase = "database" // the embedded database (config database)
	StorePostgres = "postgres" // PostgreSQL (config postgres)
)

// markerHeader is the first line of a marker.
const markerHeader = "mosaic-witness-marker/v1"

// marker says whose witness state a store holds and which backend holds
// it.
type marker struct {
	name, keyHash, home string
}

func (m marker) encode() []byte {
	return fmt.Appendf(nil, "%s\nname %s\nkey %s\nhome %s\n", markerHeader, m.name, m.keyHash, m.home)
}

func parseMarker(b []byte) (marker, error) {
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var m marker
	if len(lines) != 4 || lines[0] != markerHeader {
		return m, errors.New("the witness marker in the state store is not one this Mosaic writes")
	}
	for i, f := range []*string{&m.name, &m.keyHash, &m.home} {
		k, v, ok := strings.Cut(lines[i+1], " ")
		if !ok || k != [...]string{"name", "key", "home"}[i] || v == "" {
			return m, errors.New("the witness marker in the state store is malformed")
		}
		*f = v
	}
	return m, nil
}

// witnessKeyHash is the marker's key hash of a witness: the SHA-256 of its
// vkeys, one per line.
func witnessKeyHash(vkeys []string) string {
	h := sha256.Sum256([]byte(strings.Join(vkeys, "\n") + "\n"))
	return hex.EncodeToString(h[:])
}

// storeDescription names a store kind for messages.
func storeDescription(kind string) string {
	if kind == StorePostgres {
		return "PostgreSQL (postgres)"
	}
	return "the embedded database (database)"
}

// checkStores runs the startup checks described above, then marks the
// stores.
func (w *Witness) checkStores(ctx context.Context, cfg Config) error {
	kind, otherKind := cfg.StoreKind, cfg.OtherKind
	if kind == "" {
		kind = StoreDatabase
	}
	mine := marker{name: w.name, keyHash: witnessKeyHash(w.VerifierKeys()), home: kind}
	here, other := storeDescription(kind), storeDescription(otherKind)
	adopt := " To start from it anyway, set witness.adopt_state_store: true once (and remove it afterwards)."
	b, err := w.store.WitnessMarker(ctx)
	if err != nil {
		return fmt.Errorf("reading the witness marker: %w", err)
	}
	states, err := w.store.WitnessStates(ctx)
	if err != nil {
		return fmt.Errorf("reading the witness states: %w", err)
	}
	var refusal error
	switch {
	case b != nil:
		m, err := parseMarker(b)
		if err != nil {
			refusal = fmt.Errorf("%s: %w", here, err)
		} else if m.home != kind {
			what := "an older witness state"
			if len(states) == 0 {
				what = "no witness state"
			}
			refusal = fmt.Errorf("%s holds %s: an earlier run kept the witness's state in %s, and cosigning from what is here could cosign a checkpoint that conflicts with one cosigned since; use the config that keeps the state in %s.%s",
				here, what, storeDescription(m.home), storeDescription(m.home), adopt)
		} else if m.name != mine.name || m.keyHash != mine.keyHash {
			refusal = fmt.Errorf("%s holds the state of witness %q (key hash %s), not of this witness (%q, key hash %s): a state store holds one witness's state, so give this witness its own (another database, or another PostgreSQL schema); after changing this witness's key or name on purpose, its old state is safe to keep.%s",
				here, m.name, m.keyHash, mine.name, mine.keyHash, adopt)
		}
	case len(states) > 0:
		// A store that holds states but no marker was written before
		// markers were: it is this witness's, by its config.
	case cfg.Other != nil:
		ob, err := cfg.Other.WitnessMarker(ctx)
		if err != nil {
			return fmt.Errorf("reading the witness marker in %s: %w", other, err)
		}
		ostates, err := cfg.Other.WitnessStates(ctx)
		if err != nil {
			return fmt.Errorf("reading the witness states in %s: %w", other, err)
		}
		om, _ := parseMarker(ob)
		switch {
		case ob != nil && om.home == kind:
			refusal = fmt.Errorf("%s holds no witness state, but %s says the witness's state was moved here: it was lost or replaced, and starting from nothing would let the witness cosign a checkpoint that conflicts with one it cosigned.%s",
				here, other, adopt)
		case len(ostates) > 0:
			refusal = fmt.Errorf("%s holds no witness state, but %s holds %d logs' witness state: starting from nothing would let the witness cosign any checkpoint proved from size 0, a fork of one it cosigned included; keep the config that uses %s (adding or removing postgres moves the witness's state store).%s",
				here, other, len(ostates), other, adopt)
		}
	}
	if refusal != nil && !cfg.AdoptStore {
		return refusal
	}
	if refusal != nil {
		w.log.Warn("witness: adopting a state store the startup checks refuse (witness.adopt_state_store); remove the setting", "reason", refusal.Error())
	}
	if !bytes.Equal(b, mine.encode()) {
		if err := w.store.SetWitnessMarker(ctx, mine.encode()); err != nil {
			return fmt.Errorf("writing the witness marker: %w", err)
		}
	}
	if cfg.Other != nil {
		// The other backend is not home: going back to it later is
		// refused (it would hold an older state, or none).
		away := marker{name: mine.name, keyHash: mine.keyHash, home: kind}.encode()
		if ob, err := cfg.Other.WitnessMarker(ctx); err != nil {
			return fmt.Errorf("reading the witness marker in %s: %w", other, err)
		} else if !bytes.Equal(ob, away) {
			if err := cfg.Other.SetWitnessMarker(ctx, away); err != nil {
				return fmt.Errorf("marking %s as not holding the witness's state: %w", other, err)
			}
		}
	}
	return nil
}
