package bolt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"
)

func filterKeyN(i int) []byte {
	k := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
	return k[:]
}

// TestFilter: every key added passes, absent keys pass about 1% of the
// time, and a filter reads back as written.
func TestFilter(t *testing.T) {
	const n = 100000
	f := newFilter(n)
	for i := range n {
		f.add(filterKeyN(i))
	}
	g, err := decodeFilter(f.encode())
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if !g.mayContain(filterKeyN(i)) {
			t.Fatalf("key %d was added and does not pass", i)
		}
	}
	passed := 0
	for i := n; i < 2*n; i++ {
		if g.mayContain(filterKeyN(i)) {
			passed++
		}
	}
	if rate := float64(passed) / n; rate > 0.02 {
		t.Fatalf("%.2f%% of absent keys pass, want about 1%%", 100*rate)
	}
}

func TestDecodeFilterRefuses(t *testing.T) {
	good := newFilter(100).encode()
	tooMany := newFilter(100).encode()
	binary.LittleEndian.PutUint64(tooMany, 1<<40)
	for name, v := range map[string][]byte{
		"missing":     nil,
		"short":       good[:8],
		"cut":         good[:len(good)-1],
		"longer":      append(good, 0),
		"sized wrong": tooMany,
	} {
		if _, err := decodeFilter(v); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// TestDamagedFilter: a run whose filter is damaged (cut short, or one bit
// flipped) makes lookups fail instead of answering that keys are absent.
func TestDamagedFilter(t *testing.T) {
	for name, damage := range map[string]func([]byte) []byte{
		"short":   func(v []byte) []byte { return v[:5] },
		"flipped": func(v []byte) []byte { v[20] ^= 0x10; return v },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mosaic.db")
			id := sha256.Sum256([]byte("log"))
			db := fourRuns(t, path, id, 20)
			crash(t, db) // the filters in memory are gone with the process
			db = open(t, path)
			defer db.Close()
			err := db.db.Update(func(tx *bbolt.Tx) error {
				lr := tx.Bucket(runsBucket).Bucket(id[:])
				name, _ := lr.Cursor().First()
				rb := lr.Bucket(name)
				return rb.Put(filterKey, damage(bytes.Clone(rb.Get(filterKey))))
			})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = db.Get(context.Background(), id, testRecord(70, false).Key)
			if err == nil || !strings.Contains(err.Error(), "filter") {
				t.Fatalf("Get = %v, want an error about the damaged filter", err)
			}
		})
	}
}

// TestFilterBytes: the filters lookups load are counted, and those of
// runs merged away are dropped from memory and from the count.
func TestFilterBytes(t *testing.T) {
	id := sha256.Sum256([]byte("log"))
	path := filepath.Join(t.TempDir(), "mosaic.db")
	db := fourRuns(t, path, id, 2000)
	crash(t, db) // start with no filter in memory
	db = open(t, path)
	db.stopCompactor()
	defer db.Close()
	if n := db.FilterBytes(); n != 0 {
		t.Fatalf("FilterBytes = %d before any lookup", n)
	}
	checkRange(t, db, id, 100000, 100010, false) // absent: every run's filter
	four := db.FilterBytes()
	// Four filters of 2,000 keys at 10 bits each, in 512-bit blocks.
	if want := int64(4 * 64 * ((2000*filterBitsPerKey + 511) / 512)); four != want {
		t.Fatalf("FilterBytes = %d after lookups in four runs, want %d", four, want)
	}
	compactNow(t, db)
	// The merge keeps the filter it built; the inputs' are dropped.
	if n := db.FilterBytes(); n < four*9/10 || n > four*11/10 {
		t.Fatalf("FilterBytes = %d with the merged run's filter, want about %d", n, four)
	}
}
