package s3

import (
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
)

// TestObjectLock, against MinIO with Object Lock on: immutable objects
// (full tiles, issuers, the final checkpoint) are written with the
// configured retention and cannot be deleted, by the log's own
// credentials either; mutable ones (the checkpoint, partial tiles,
// staging bundles) carry none and are deleted as before; a rewrite of an
// immutable object works (a new version, retained too).
func TestObjectLock(t *testing.T) {
	srv := testenv.MinIOObjectLock(t)
	now := time.Now()
	cfg := config(srv)
	cfg.ObjectLock = &ObjectLock{Mode: "GOVERNANCE", Retain: 48 * time.Hour, Now: func() time.Time { return now }}
	s := newStore(t, cfg)
	client := srv.Client(t)
	for _, tc := range []struct {
		key    string
		locked bool
	}{
		{"tile/0/000", true},
		{"tile/data/000", true},
		{"issuer/" + strings.Repeat("ab", 32), true},
		{storage.FinalCheckpointKey, true},
		{"checkpoint", false},
		{"tile/0/001.p/3", false},
		{"tile/data/001.p/3", false},
		{"staging/round", false},
	} {
		if err := s.Put(ctx(t), tc.key, []byte("x"), storage.Options(tc.key)); err != nil {
			t.Fatalf("put %s: %v", tc.key, err)
		}
		mode, until, err := client.GetObjectRetention(ctx(t), srv.Bucket, tc.key, "")
		switch {
		case tc.locked && (err != nil || mode == nil || *mode != minio.Governance || until == nil || until.Sub(now.Add(48*time.Hour)).Abs() > time.Second):
			t.Errorf("%s: retention %v until %v (%v), want GOVERNANCE for 48h", tc.key, mode, until, err)
		case !tc.locked && err == nil && mode != nil && *mode != "":
			t.Errorf("%s: mutable object retained (%v until %v)", tc.key, *mode, until)
		}
		// The log's own credentials delete the version.
		info, err := client.StatObject(ctx(t), srv.Bucket, tc.key, minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		err = client.RemoveObject(ctx(t), srv.Bucket, tc.key, minio.RemoveObjectOptions{VersionID: info.VersionID})
		if tc.locked && err == nil {
			t.Errorf("%s: the retained version was deleted", tc.key)
		}
		if !tc.locked && err != nil {
			t.Errorf("%s: deleting a mutable object: %v", tc.key, err)
		}
	}
	// Delete through the store (what the partial tile GC does) and a
	// rewrite of a retained object.
	if err := s.Delete(ctx(t), "tile/0/001.p/3"); err != nil {
		t.Errorf("delete a partial tile: %v", err)
	}
	if err := s.Put(ctx(t), "tile/0/000", []byte("x"), storage.Options("tile/0/000")); err != nil {
		t.Errorf("rewriting a retained tile: %v", err)
	}
	if b, err := s.Get(ctx(t), "tile/0/000"); err != nil || string(b) != "x" {
		t.Errorf("get after rewrite: %q %v", b, err)
	}
}

// TestObjectLockNeedsLockedBucket: object_lock on a bucket created without
// Object Lock fails at startup with a sentence saying how to fix it.
func TestObjectLockNeedsLockedBucket(t *testing.T) {
	cfg := config(testenv.MinIO(t))
	cfg.ObjectLock = &ObjectLock{Mode: "COMPLIANCE", Retain: time.Hour}
	_, err := New(ctx(t), cfg)
	if err == nil || !strings.Contains(err.Error(), "cannot retain objects") || !strings.Contains(err.Error(), "created") {
		t.Fatalf("New on a bucket without Object Lock: %v", err)
	}
}
