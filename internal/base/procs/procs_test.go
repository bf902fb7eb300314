package procs

import (
	"context"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestTarget(t *testing.T) {
	for _, c := range []struct {
		busy       float64
		cur, limit int
		want       int
	}{
		{0.25, 2, 2, 1}, // 1,000 entries/s on two cores: one thread
		{0.39, 2, 2, 1}, // just under downBelow·1
		{0.4, 2, 2, 2},  // from there on it keeps both
		{0.7, 1, 2, 1},  // one thread 70% busy: enough
		{0.8, 1, 2, 2},  // 80%: more
		{1.0, 1, 8, 2},  // saturated: doubles,
		{2.0, 2, 8, 4},  // and again,
		{3.9, 4, 8, 8},  // up to the limit,
		{8.0, 8, 8, 8},  // and no further
		{1.0, 8, 8, 2},  // an 8-thread process using one core: 2 (60% each)
		{2.7, 8, 8, 5},  // using 2.7: 5
		{2.9, 8, 8, 8},  // 2.9 ≥ 0.4·7: keeps 8
		{0.0, 8, 8, 1},  // idle: 1
		{0.0, 1, 8, 1},  // never 0
		{100, 1, 1, 1},  // a limit of 1 is 1
	} {
		if got := Target(c.busy, c.cur, c.limit); got != c.want {
			t.Errorf("Target(%v, %d, %d) = %d, want %d", c.busy, c.cur, c.limit, got, c.want)
		}
	}
}

// TestTargetSteady: for any steady load that costs at least as much CPU on
// more threads, Target settles after at most a few steps and then stays,
// on enough threads for the load.
func TestTargetSteady(t *testing.T) {
	for _, limit := range []int{2, 4, 8, 64} {
		for load := 0.0; load <= float64(limit); load += 0.05 {
			cur := limit
			var seen []int
			for range 20 {
				// The load's CPU on n threads: its demand, 3% more
				// per extra thread (spinning), capped by n.
				busy := min(float64(cur), load*(1+0.03*float64(cur-1)))
				cur = Target(busy, cur, limit)
				seen = append(seen, cur)
			}
			last := seen[len(seen)-6:]
			for _, n := range last {
				if n != last[0] {
					t.Fatalf("limit %d, load %.2f: flaps %v", limit, load, seen)
				}
			}
			if need := min(float64(limit), load); float64(last[0]) < need {
				t.Fatalf("limit %d, load %.2f: settled on %d threads %v", limit, load, last[0], seen)
			}
		}
	}
}

// TestRunFollowsLoad runs the real controller in this process: idle, it
// goes down to one thread; with two goroutines spinning, back up to the
// limit; stopped, it gives GOMAXPROCS back to the runtime's default.
func TestRunFollowsLoad(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set in the environment, so Run leaves it alone (as it should)")
	}
	limit := runtime.GOMAXPROCS(0)
	if limit < 2 {
		t.Skipf("this machine runs Go on %d thread: there is nothing to adapt", limit)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, 50*time.Millisecond)
	}()
	waitFor := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for runtime.GOMAXPROCS(0) != want {
			if time.Now().After(deadline) {
				t.Fatalf("GOMAXPROCS is %d after 10 s, want %d", runtime.GOMAXPROCS(0), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor(1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 * limit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := 0; i < 1e5; i++ {
					_ = i * i
				}
			}
		}()
	}
	waitFor(limit)
	close(stop)
	wg.Wait()
	cancel()
	<-done
	if got := runtime.GOMAXPROCS(0); got != limit {
		t.Fatalf("after Run returned, GOMAXPROCS = %d, want the default %d", got, limit)
	}
}

// TestRunOnlyOnce: a second Run in the same process leaves GOMAXPROCS to the
// first, and returns at once.
func TestRunOnlyOnce(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) < 2 {
		t.Skip("Run leaves GOMAXPROCS alone here")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, time.Hour)
	}()
	for !running.Load() {
		time.Sleep(time.Millisecond)
	}
	second := make(chan struct{})
	go func() {
		defer close(second)
		Run(context.Background(), time.Millisecond)
	}()
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("a second Run did not return while the first ran")
	}
	cancel()
	<-done
	if running.Load() {
		t.Fatal("running is still set after the first Run returned")
	}
}
