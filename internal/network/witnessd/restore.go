package witnessd

import (
	"context"
	"encoding/hex"
	"fmt"
	"sort"
)

// CheckRestore refuses to replace the live witness state with backup's
// when that would take the witness back: for some log, backup has no
// state, or the state of a smaller tree, or of another tree of the same
// size, than live. From such a backup the witness would cosign a
// checkpoint that conflicts with one it cosigned after the backup was
// taken. names gives logs' origins by store key, for the message (a log
// it lacks is named by its origin hash).
func CheckRestore(live, backup map[[32]byte][]byte, names map[[32]byte]string) error {
	keys := make([][32]byte, 0, len(live))
	for k := range live {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return hex.EncodeToString(keys[i][:]) < hex.EncodeToString(keys[j][:]) })
	for _, k := range keys {
		name := names[k]
		if name == "" {
			name = "with origin hash " + hex.EncodeToString(k[:])
		}
		l, err := decodeState(live[k])
		if err != nil {
			return fmt.Errorf("the live witness state of log %s: %w", name, err)
		}
		if l.size == 0 {
			continue
		}
		b, ok := backup[k]
		if !ok {
			return fmt.Errorf("the backup has no witness state of log %s, which the live database has at tree size %d: the witness cosigned that log after the backup was taken, and restoring it would let the witness cosign a checkpoint that conflicts with those", name, l.size)
		}
		s, err := decodeState(b)
		if err != nil {
			return fmt.Errorf("the backup's witness state of log %s: %w", name, err)
		}
		switch {
		case s.size < l.size:
			return fmt.Errorf("the backup's witness state of log %s (tree size %d) is older than the live one (tree size %d): the witness cosigned since the backup was taken, and restoring it would let the witness cosign a checkpoint that conflicts with those", name, s.size, l.size)
		case s.size == l.size && s.hash != l.hash:
			return fmt.Errorf("the backup's witness state of log %s is of another tree of the same size (%d) than the live one's: it is not this witness's history", name, s.size)
		}
	}
	return nil
}

// CheckMarker reports whether the marker b (from a store, nil if none)
// belongs to the witness named name with vkeys.
func CheckMarker(b []byte, name string, vkeys []string) error {
	if b == nil {
		return nil
	}
	m, err := parseMarker(b)
	if err != nil {
		return err
	}
	if m.name != name || m.keyHash != witnessKeyHash(vkeys) {
		return fmt.Errorf("it holds the state of witness %q (key hash %s), not of this config's witness %q (key hash %s)", m.name, m.keyHash, name, witnessKeyHash(vkeys))
	}
	return nil
}

// ResetLog deletes the state of the log with origin from store: the
// documented reset (mosaic witness reset) of a log whose state was
// cosigned under other keys than the witness trusts for it now (a log
// list gave its origin to another party). The witness then cosigns the
// log's next checkpoint as it would a new log's, from size 0, so the
// operator resets a log only once sure its state is not the real log's.
// It returns the tree size the deleted state held, and whether there was
// one.
func ResetLog(ctx context.Context, store Store, origin string) (size int64, existed bool, err error) {
	key := StateKey(origin)
	b, err := store.WitnessState(ctx, key)
	if err != nil {
		return 0, false, fmt.Errorf("reading the witness state of %s: %w", origin, err)
	}
	if b == nil {
		return 0, false, nil
	}
	s, err := decodeState(b)
	if err != nil {
		// A corrupt state is reset too: that is what the reset is for.
		s = state{}
	}
	if err := store.DeleteWitnessState(ctx, key); err != nil {
		return 0, true, fmt.Errorf("deleting the witness state of %s: %w", origin, err)
	}
	return s.size, true, nil
}
