package deduptest

import (
	"context"
	"sync"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/state/dedup"
)

// memStore is a minimal correct dedup.Store: the suite must pass it.
type memStore struct {
	mu sync.Mutex
	m  map[[32]byte]map[dedup.Key]dedup.Value
}

func (s *memStore) Get(ctx context.Context, id [32]byte, k dedup.Key) (dedup.Value, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[id][k]
	return v, ok, nil
}

func (s *memStore) Put(ctx context.Context, id [32]byte, rs []dedup.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[id] == nil {
		s.m[id] = map[dedup.Key]dedup.Value{}
	}
	for _, r := range rs {
		if _, ok := s.m[id][r.Key]; !ok && r.HasKey() {
			s.m[id][r.Key] = r.Value
		}
	}
	return nil
}

func (s *memStore) Check(ctx context.Context, id [32]byte) error { return nil }

func TestMemStorePasses(t *testing.T) {
	Run(t, func(t *testing.T) dedup.Store { return &memStore{m: map[[32]byte]map[dedup.Key]dedup.Value{}} })
}
