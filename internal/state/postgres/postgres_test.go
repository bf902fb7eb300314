package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/state/dedup"
	"github.com/mosaic-ct/mosaic/internal/state/dedup/deduptest"
	"github.com/mosaic-ct/mosaic/internal/state/lock"
	"github.com/mosaic-ct/mosaic/internal/state/lock/locktest"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
)

func open(t *testing.T) *DB { return openOn(t, testenv.Postgres(t)) }

// openOn opens the database at dsn, closed when the test ends.
func openOn(t *testing.T, dsn string) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

func TestLockConformance(t *testing.T) {
	locktest.Run(t, func(t *testing.T) lock.Backend { return open(t) })
}

func TestDedupConformance(t *testing.T) {
	deduptest.Run(t, func(t *testing.T) dedup.Store { return open(t) })
}

// TestOpenTwice: a second process opening the same database (tables exist)
// works, and several opening at once do not trip over schema creation.
func TestOpenTwice(t *testing.T) {
	dsn := testenv.Postgres(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := Open(ctx, dsn)
			if err == nil {
				db.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		}
	}
}

// TestSharedAcrossProcesses: two DB handles (two processes) on one database
// see each other's checkpoints: a stale writer loses.
func TestSharedAcrossProcesses(t *testing.T) {
	dsn := testenv.Postgres(t)
	ctx := context.Background()
	a, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var id [32]byte
	if err := a.Create(ctx, id, []byte("c0")); err != nil {
		t.Fatal(err)
	}
	if err := a.Replace(ctx, id, []byte("c0"), []byte("c1")); err != nil {
		t.Fatal(err)
	}
	if err := b.Replace(ctx, id, []byte("c0"), []byte("fork")); err == nil {
		t.Fatal("second process replaced a checkpoint the first had already replaced")
	}
}

func TestOpenUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Port 1 on loopback: nothing listens there.
	_, err := Open(ctx, "postgres://mosaic:s3cret@127.0.0.1:1/mosaic?connect_timeout=2")
	if err == nil {
		t.Fatal("Open of an unreachable server succeeded")
	}
	msg := err.Error()
	t.Logf("error: %v", msg)
	if !strings.Contains(msg, "127.0.0.1:1") {
		t.Errorf("error does not name the server: %v", msg)
	}
	if strings.Contains(msg, "s3cret") {
		t.Errorf("error leaks the password: %v", msg)
	}
}

func TestOpenBadDSN(t *testing.T) {
	_, err := Open(context.Background(), "postgres://mosaic:s3cret@127.0.0.1:notaport/x")
	if err == nil {
		t.Fatal("Open with a bad DSN succeeded")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error leaks the password: %v", err)
	}
}

func TestLease(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	const ttl = time.Hour
	acquire := func(holder string, ttl time.Duration) bool {
		t.Helper()
		ok, err := db.AcquireLease(ctx, "sequencer", holder, "addr-"+holder, ttl)
		if err != nil {
			t.Fatalf("AcquireLease(%s): %v", holder, err)
		}
		return ok
	}
	if !acquire("a", ttl) {
		t.Fatal("a could not take a free lease")
	}
	if acquire("b", ttl) {
		t.Fatal("b took a lease a holds")
	}
	if !acquire("a", ttl) {
		t.Fatal("a could not renew its lease")
	}
	if h, addr, ok, err := db.Lease(ctx, "sequencer"); err != nil || !ok || h != "a" || addr != "addr-a" {
		t.Fatalf("Lease: %q %q %v %v, want a at addr-a", h, addr, ok, err)
	}
	if _, _, ok, err := db.Lease(ctx, "nobody"); err != nil || ok {
		t.Fatalf("Lease of a lease never taken: %v %v", ok, err)
	}
	// Other lease names are independent.
	if ok, err := db.AcquireLease(ctx, "other", "b", "addr-b", ttl); err != nil || !ok {
		t.Fatalf("b could not take another free lease: %v %v", ok, err)
	}
	// b releasing a's lease does nothing.
	if err := db.ReleaseLease(ctx, "sequencer", "b"); err != nil {
		t.Fatal(err)
	}
	if acquire("b", ttl) {
		t.Fatal("b took a's lease after b's release of it")
	}
	if err := db.ReleaseLease(ctx, "sequencer", "a"); err != nil {
		t.Fatal(err)
	}
	if !acquire("b", ttl) {
		t.Fatal("b could not take a released lease")
	}
	if _, err := db.AcquireLease(ctx, "sequencer", "a", "addr-a", 0); err == nil {
		t.Fatal("AcquireLease with zero ttl succeeded")
	}
}

func TestLeaseExpiry(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	ok, err := db.AcquireLease(ctx, "sequencer", "a", "addr-a", 200*time.Millisecond)
	if err != nil || !ok {
		t.Fatalf("a: %v %v", ok, err)
	}
	if ok, err := db.AcquireLease(ctx, "sequencer", "b", "addr-b", time.Hour); err != nil || ok {
		t.Fatalf("b took a live lease: %v %v", ok, err)
	}
	time.Sleep(300 * time.Millisecond)
	if _, _, ok, err := db.Lease(ctx, "sequencer"); err != nil || ok {
		t.Fatalf("Lease reports an expired lease as held: %v %v", ok, err)
	}
	if ok, err := db.AcquireLease(ctx, "sequencer", "b", "addr-b", time.Hour); err != nil || !ok {
		t.Fatalf("b could not take an expired lease: %v %v", ok, err)
	}
	if ok, err := db.AcquireLease(ctx, "sequencer", "a", "addr-a", time.Hour); err != nil || ok {
		t.Fatalf("a took back a lease b now holds: %v %v", ok, err)
	}
}

// TestLeaseRace: many candidates try to take a free lease at once; exactly
// one gets it.
func TestLeaseRace(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	const n = 16
	var wg sync.WaitGroup
	got := make([]bool, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got[i], errs[i] = db.AcquireLease(ctx, "sequencer", string(rune('a'+i)), "addr-"+string(rune('a'+i)), time.Hour)
		}()
	}
	close(start)
	wg.Wait()
	winners := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("candidate %d: %v", i, errs[i])
		}
		if got[i] {
			winners++
		}
	}
	if winners != 1 {
		t.Fatalf("%d candidates got the lease, want exactly 1", winners)
	}
}

// BenchmarkDedupSize measures the dedup cache's size in PostgreSQL (heap,
// indexes and TOAST of every mosaic_dedup* table): rounds of 1,000 random
// keys, as a busy log writes them. Reports bytes per entry.
func BenchmarkDedupSize(b *testing.B) {
	b.Run("dedup", func(b *testing.B) { dedupSize(b, false) })
	b.Run("dedup+hashindex", func(b *testing.B) { dedupSize(b, true) })
}

func dedupSize(b *testing.B, hashIndex bool) {
	ctx := context.Background()
	db, err := Open(ctx, testenv.Postgres(b))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	id := sha256.Sum256([]byte("log"))
	const round = 1000
	n := 0
	for b.Loop() {
		recs := make([]dedup.Record, round)
		for j := range recs {
			recs[j] = dedup.Record{
				Key:   dedup.KeyFor(false, [32]byte{}, binary.BigEndian.AppendUint64(nil, uint64(n))),
				Value: dedup.Value{Index: uint64(n), Timestamp: 1767225600000 + uint64(n)},
			}
			if hashIndex {
				recs[j].LeafHash = sha256.Sum256(binary.BigEndian.AppendUint64([]byte("leaf"), uint64(n)))
			}
			n++
		}
		if err := db.Put(ctx, id, recs); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		b.Fatal(err)
	}
	var size int64
	err = db.pool.QueryRow(ctx, `SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c
		WHERE c.relkind = 'r' AND (c.relname LIKE 'mosaic_dedup%' OR c.relname = 'mosaic_leaf_hashes') AND c.relnamespace = current_schema()::regnamespace`).Scan(&size)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(size)/float64(n), "B/entry")
}

// TestLegacyDedupRefused: a database with the table Mosaic used before
// full-width dedup keys (records under 16-byte keys) is not silently
// trusted: Check refuses the logs that have rows there until they are
// rebuilt, and the rebuild deletes those rows.
func TestLegacyDedupRefused(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	k := dedup.KeyFor(false, [32]byte{}, []byte("cert"))
	for _, stmt := range []string{
		`CREATE TABLE mosaic_dedup (
			log_id bytea NOT NULL CHECK (length(log_id) = 32),
			key bytea NOT NULL CHECK (length(key) = 16),
			value bytea NOT NULL CHECK (length(value) = 16),
			PRIMARY KEY (log_id, key))`,
	} {
		if _, err := db.pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.pool.Exec(ctx, "INSERT INTO mosaic_dedup VALUES ($1, $2, $3)",
		a[:], k[:16], dedup.EncodeValue(dedup.Value{Index: 1, Timestamp: 2})); err != nil {
		t.Fatal(err)
	}
	err := db.Check(ctx, a)
	if !errors.Is(err, dedup.ErrNeedsRebuild) || !strings.Contains(err.Error(), "128-bit") {
		t.Fatalf("Check of a log with legacy rows: err = %v, want ErrNeedsRebuild naming the old format", err)
	}
	if err := db.Check(ctx, b); err != nil {
		t.Fatalf("Check of a log without legacy rows: %v", err)
	}
	if err := db.Rebuild(ctx, a, func(put func([]dedup.Record) error) error {
		return put([]dedup.Record{{Key: k, Value: dedup.Value{Index: 5, Timestamp: 6}}})
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Check(ctx, a); err != nil {
		t.Fatalf("Check after rebuild: %v", err)
	}
	if v, ok, err := db.Get(ctx, a, k); err != nil || !ok || v.Index != 5 {
		t.Fatalf("Get after rebuild = %+v, %v, %v", v, ok, err)
	}
	var left int
	if err := db.pool.QueryRow(ctx, "SELECT count(*) FROM mosaic_dedup WHERE log_id = $1", a[:]).Scan(&left); err != nil || left != 0 {
		t.Fatalf("legacy rows of the rebuilt log: %d (%v), want 0", left, err)
	}
}

// TestReplaceLeased: a commit that reaches the database after its sender's
// lease expired or moved changes nothing (issue 25, D2: a statement held by
// a partition and delivered after the heal), while the holder of a live
// lease commits, and the compare-and-swap still applies.
func TestReplaceLeased(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	var id [32]byte
	id[0] = 7
	if err := db.Create(ctx, id, []byte("cp0")); err != nil {
		t.Fatal(err)
	}
	if ok, err := db.AcquireLease(ctx, "log/x", "a", "addr-a", 300*time.Millisecond); err != nil || !ok {
		t.Fatalf("a: %v %v", ok, err)
	}
	if err := db.ReplaceLeased(ctx, id, []byte("cp0"), []byte("cp1"), "log/x", "a"); err != nil {
		t.Fatalf("the lease holder's commit: %v", err)
	}
	if err := db.ReplaceLeased(ctx, id, []byte("cp0"), []byte("cp1b"), "log/x", "a"); !errors.Is(err, lock.ErrConflict) {
		t.Fatalf("a commit from a stale checkpoint: %v, want a conflict", err)
	}
	if err := db.ReplaceLeased(ctx, id, []byte("cp1"), []byte("cp2"), "log/x", "b"); !errors.Is(err, ErrNotLeaseHolder) {
		t.Fatalf("a commit by a process that never held the lease: %v, want ErrNotLeaseHolder", err)
	}
	time.Sleep(400 * time.Millisecond) // the database's clock passes the expiry
	if err := db.ReplaceLeased(ctx, id, []byte("cp1"), []byte("cp2"), "log/x", "a"); !errors.Is(err, ErrNotLeaseHolder) {
		t.Fatalf("a commit after the lease expired: %v, want ErrNotLeaseHolder", err)
	}
	if ok, err := db.AcquireLease(ctx, "log/x", "b", "addr-b", time.Hour); err != nil || !ok {
		t.Fatalf("b: %v %v", ok, err)
	}
	if err := db.ReplaceLeased(ctx, id, []byte("cp1"), []byte("cp2"), "log/x", "a"); !errors.Is(err, ErrNotLeaseHolder) {
		t.Fatalf("a commit after the lease moved: %v, want ErrNotLeaseHolder", err)
	}
	if got, err := db.Fetch(ctx, id); err != nil || string(got) != "cp1" {
		t.Fatalf("checkpoint %q (%v), want cp1: a refused commit changed it", got, err)
	}
	if err := db.ReplaceLeased(ctx, id, []byte("cp1"), []byte("cp2"), "log/x", "b"); err != nil {
		t.Fatalf("the new holder's commit: %v", err)
	}
}
