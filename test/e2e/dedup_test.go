package e2e

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/process/devmode"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
)

// TestLegacyDedupCacheUpgrade: a log whose dedup cache was written with
// 128-bit keys (by Mosaic before full-width keys) refuses to start with a
// message naming 'mosaic cache rebuild'; the command rebuilds the cache
// from the data tiles, and resubmissions then get their original SCTs.
func TestLegacyDedupCacheUpgrade(t *testing.T) {
	dir := t.TempDir()
	s := startDev(t, dir)
	c := newClient(t, s)
	ca := newCAs(t, s)
	subs := []*submission{
		{name: "cert", chain: [][]byte{leaf(t, ca.ecInt, "a.example", testca.LeafOptions{}), ca.ecInt.DER}},
		{name: "precert", precert: true, chain: [][]byte{leaf(t, ca.ecInt, "b.example", testca.LeafOptions{Precert: true}), ca.ecInt.DER}},
		{name: "rsa cert", chain: [][]byte{leaf(t, ca.rsaInt, "c.example", testca.LeafOptions{KeyType: testca.RSA2048}), ca.rsaInt.DER}},
	}
	for _, sub := range subs {
		submit(t, c, sub)
	}
	s.stop()

	// Turn the cache into the old format: the same records under keys
	// truncated to 16 bytes, in the old bucket. They are in the dedup
	// cache's runs (internal/state/bolt/runs.go: per log, per run, blocks of
	// 48-byte records named 'k' and their last key, each ending with a
	// 4-byte checksum), which are deleted.
	cfgPath := filepath.Join(dir, devmode.ConfigFile)
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(cfg.DatabaseFor(&cfg.Logs[0]), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	err = db.Update(func(tx *bbolt.Tx) error {
		runs := tx.Bucket([]byte("dedup-runs"))
		old, err := tx.CreateBucketIfNotExists([]byte("dedup"))
		if err != nil {
			return err
		}
		return runs.ForEachBucket(func(logID []byte) error {
			ob, err := old.CreateBucket(logID)
			if err != nil {
				return err
			}
			lr := runs.Bucket(logID)
			if err := lr.ForEachBucket(func(run []byte) error {
				return lr.Bucket(run).ForEach(func(name, block []byte) error {
					if name[0] != 'k' {
						return nil
					}
					for recs := block[:len(block)-4]; len(recs) > 0; recs = recs[48:] {
						moved++
						if err := ob.Put(bytes.Clone(recs[:16]), bytes.Clone(recs[32:48])); err != nil {
							return err
						}
					}
					return nil
				})
			}); err != nil {
				return err
			}
			return runs.DeleteBucket(logID)
		})
	})
	db.Close()
	if err != nil || moved != len(subs) {
		t.Fatalf("making a legacy cache: moved %d records, %v", moved, err)
	}

	// serve refuses the log and says what to do.
	refused := launch(t, []string{"serve", "-dev", "-data", dir}, nil)
	if err := <-refused.done; err == nil {
		t.Fatal("serve started over a legacy dedup cache")
	}
	out := refused.logBuf.String()
	if !strings.Contains(out, "mosaic cache rebuild") || !strings.Contains(out, "128-bit") {
		t.Fatalf("serve's refusal does not explain the problem and name the command:\n%s", out)
	}

	rebuild, err := exec.Command(mosaicBinary(t), "cache", "rebuild", "-config", cfgPath).CombinedOutput()
	if err != nil {
		t.Fatalf("mosaic cache rebuild: %v\n%s", err, rebuild)
	}
	if !strings.Contains(string(rebuild), "entries=3") {
		t.Errorf("cache rebuild output does not report 3 entries:\n%s", rebuild)
	}

	s = startDev(t, dir)
	c = newClient(t, s)
	for _, sub := range subs {
		dup := &submission{name: sub.name + " (again)", chain: sub.chain, precert: sub.precert}
		submit(t, c, dup)
		if dup.index(t) != sub.index(t) || dup.sct.Timestamp != sub.sct.Timestamp {
			t.Errorf("%s: after the rebuild a resubmission got index %d ts %d, want %d ts %d",
				sub.name, dup.index(t), dup.sct.Timestamp, sub.index(t), sub.sct.Timestamp)
		}
	}
	if got := s.checkpoint(t).Size; got != int64(len(subs)) {
		t.Errorf("tree size %d after resubmissions, want %d", got, len(subs))
	}
}
