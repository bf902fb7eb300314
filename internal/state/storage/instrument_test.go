package storage_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/state/storage"
	"github.com/mosaic-ct/mosaic/internal/state/storage/localfs"
	"github.com/mosaic-ct/mosaic/internal/state/storage/storagetest"
)

func instrumentedDir(t *testing.T) *storage.Instrumented {
	d, err := localfs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return storage.Instrument(d, prometheus.NewRegistry())
}

// TestInstrumentedConformance: the metrics wrapper keeps the contract.
func TestInstrumentedConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Backend { return instrumentedDir(t) })
}

// TestAsThroughWrappers: the optional interfaces of a wrapped backend are
// found through its wrapper, and one it lacks is not.
func TestAsThroughWrappers(t *testing.T) {
	b := instrumentedDir(t)
	if _, ok := storage.As[storage.WriterLocker](b); !ok {
		t.Error("a local directory's writer lock was not found through Instrumented")
	}
	if _, ok := storage.As[storage.BatchDeleter](b); !ok {
		t.Error("a local directory's batch delete was not found through Instrumented")
	}
	if _, ok := storage.As[interface{ NoSuchMethod() }](b); ok {
		t.Error("As found a method no backend has")
	}
}
