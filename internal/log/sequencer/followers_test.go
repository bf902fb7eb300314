package sequencer

import (
	"context"
	"sync"
	"testing"
)

// followerRecorder is a follower that keeps what it is handed.
type followerRecorder struct {
	mu  sync.Mutex
	got [][]byte
	ran bool
}

func (r *followerRecorder) Publish(signed []byte) {
	r.mu.Lock()
	r.got = append(r.got, signed)
	r.mu.Unlock()
}

func (r *followerRecorder) Run(ctx context.Context) {
	r.mu.Lock()
	r.ran = true
	r.mu.Unlock()
	<-ctx.Done()
}

// TestFollowers checks that a follower is handed every committed
// checkpoint (the newest one last) while the round still publishes it to
// storage itself.
func TestFollowers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := Create(ctx, e.config(t)); err != nil {
		t.Fatal(err)
	}
	rec := &followerRecorder{}
	cfg := e.config(t)
	cfg.Followers = []Publisher{rec}
	s, err := Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]*Pending, 300)
	for i := range ps {
		ps[i] = pending(i)
	}
	addAll(t, s, ps)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !rec.ran || len(rec.got) == 0 {
		t.Fatalf("the follower ran: %v, got %d checkpoints", rec.ran, len(rec.got))
	}
	last, err := cfg.Verify(rec.got[len(rec.got)-1])
	if err != nil || last.Size != 300 {
		t.Fatalf("the follower's last checkpoint: %v, %v", last, err)
	}
	stored, err := e.store.Get(ctx, "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := cfg.Verify(stored); err != nil || v.Size != 300 {
		t.Fatalf("the stored checkpoint: %v, %v", v, err)
	}
}
