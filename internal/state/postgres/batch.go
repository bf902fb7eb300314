package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mosaic-ct/mosaic/internal/state/dedup"
)

// Dedup lookups in batches: why and why it is safe.
//
// Every submission looks its dedup key up before it is sequenced, so a
// log loaded as fast as possible sends PostgreSQL thousands of one-row
// statements a second, each a round trip and a statement's fixed cost on
// the server, queued for one of the lookupSlots connections. A batch
// gathers the lookups of one log that arrive while it waits for a slot,
// and sends them as one statement when it gets one (key = ANY($2)), so
// that the more lookups queue, the fewer statements they take. A lookup
// that finds a slot free waits for nobody: its batch holds it alone.
//
// What a lookup returns is what a statement of its own would have:
//   - a batch's statement starts after every lookup in it was asked for
//     (they join before the batch takes a slot, and none joins after), and
//     reads committed rows, so a record Put before a lookup began is
//     found, as with one statement per lookup;
//   - a key is reported absent only from a statement that succeeded and
//     returned no row for it; a failed statement (or a batch given up
//     waiting for a slot) fails every lookup in it, never makes a key
//     look new;
//   - rows are matched to lookups by their full 32-byte key.
//
// What an attacker holding many connections gets: a batch holds at most
// maxBatch keys (one statement of at most 8 KiB of keys), a lookup that
// gives up (its context ends) leaves its batch, and a batch whose lookups
// all left is not sent.

// maxBatch is how many lookups one statement answers at most.
const maxBatch = 256

// batchTimeout bounds how long a batch waits for a slot and its
// statement: a lookup normally gives up before, with its own context.
const batchTimeout = 30 * time.Second

// batcher gathers the dedup lookups of each log into batches.
type batcher struct {
	mu   sync.Mutex
	open map[[32]byte]*lookupBatch // per log, the batch that lookups join
	// For tests: lookups that joined a batch, and statements sent.
	joined, sent atomic.Uint64
}

// lookupBatch is the dedup lookups of one log sent as one statement.
type lookupBatch struct {
	keys    []dedup.Key // the keys asked for (a key may be twice)
	waiting int         // lookups still waiting for the answer
	done    chan struct{}
	// Set before done is closed:
	found map[dedup.Key]dedup.Value
	err   error
}

// Get looks up a dedup key of a log, in a batch with the log's other
// lookups that wait for a connection at the same time.
func (db *DB) Get(ctx context.Context, logID [32]byte, k dedup.Key) (dedup.Value, bool, error) {
	b := &db.batches
	b.mu.Lock()
	lb := b.open[logID]
	if lb == nil || len(lb.keys) >= maxBatch {
		lb = &lookupBatch{done: make(chan struct{})}
		b.open[logID] = lb
		go db.sendBatch(logID, lb)
	}
	lb.keys = append(lb.keys, k)
	lb.waiting++
	b.joined.Add(1)
	b.mu.Unlock()
	select {
	case <-lb.done:
	case <-ctx.Done():
		b.mu.Lock()
		lb.waiting--
		b.mu.Unlock()
		return dedup.Value{}, false, fmt.Errorf("postgres: dedup lookup in log %x: %w", logID, ctx.Err())
	}
	if lb.err != nil {
		return dedup.Value{}, false, fmt.Errorf("postgres: dedup lookup in log %x: %w", logID, lb.err)
	}
	v, ok := lb.found[k]
	return v, ok, nil
}

// sendBatch waits for a lookup slot, closes lb to new lookups and answers
// them with one statement.
func (db *DB) sendBatch(logID [32]byte, lb *lookupBatch) {
	defer close(lb.done)
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	release, err := db.admitLookup(ctx)
	b := &db.batches
	b.mu.Lock()
	if b.open[logID] == lb {
		delete(b.open, logID)
	}
	keys, waiting := lb.keys, lb.waiting
	b.mu.Unlock()
	if err != nil {
		lb.err = err
		return
	}
	defer release()
	if waiting == 0 {
		lb.err = errors.New("every lookup of the batch gave up") // read by none
		return
	}
	id, ok, err := db.dedupLog(ctx, db.pool, logID, false)
	if err != nil || !ok {
		lb.err = err // no cache for the log yet: every key is absent
		return
	}
	b.sent.Add(1)
	rows, err := db.pool.Query(ctx, "SELECT key, idx, ts FROM mosaic_dedup_entries WHERE log = $1 AND key = ANY($2::bytea[])", id, keyBytes(keys))
	if err != nil {
		lb.err = err
		return
	}
	defer rows.Close()
	found := make(map[dedup.Key]dedup.Value, len(keys))
	for rows.Next() {
		var key []byte
		var idx, ts int64
		if err := rows.Scan(&key, &idx, &ts); err != nil {
			lb.err = err
			return
		}
		if len(key) != len(dedup.Key{}) {
			lb.err = fmt.Errorf("a stored dedup key is %d bytes, not %d", len(key), len(dedup.Key{}))
			return
		}
		found[dedup.Key(key)] = dedup.Value{Index: uint64(idx), Timestamp: uint64(ts)}
	}
	if err := rows.Err(); err != nil {
		lb.err = err
		return
	}
	lb.found = found
}

// keyBytes returns keys as the bytea[] of a statement.
func keyBytes(keys []dedup.Key) [][]byte {
	out := make([][]byte, len(keys))
	for i := range keys {
		out[i] = keys[i][:]
	}
	return out
}
