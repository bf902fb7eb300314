package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// errNoLeader is a standby's LeaderErr while no process holds the lease.
var errNoLeader = &ctlog.HealthError{Summary: "submissions through this process fail: the log has no leader right now (failover in progress)"}

// errLeaderNotYetKnown is a standby's LeaderErr from its start until it
// has read the lease.
var errLeaderNotYetKnown = &ctlog.HealthError{Summary: "submissions through this process fail: it has not read which process leads the log yet"}

// leaderHealth is a leader probe's failure: summary in fixed words for
// /health (no address: the processes' addresses are no client's
// business), err with the details.
func leaderHealth(summary string, err error) error {
	return &ctlog.HealthError{Summary: "submissions through this process fail: " + summary, Err: err}
}

// checkStorage reads the log's checkpoint object, to learn whether this
// process can reach the log's storage (see elector.run). The read is
// bounded by a quarter of a lease, so a storage path that hangs costs one
// standby poll.
func (e *elector) checkStorage(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.ttl/4)
	defer cancel()
	_, err := e.seqCfg.Storage.Get(ctx, "checkpoint")
	if err == nil || errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("this process cannot reach the log's storage: reading its checkpoint took longer than %v", e.ttl/4)
	}
	return fmt.Errorf("this process cannot reach the log's storage: %w", err)
}

// maxHealthBody bounds the leader's /health answer a standby reads.
const maxHealthBody = 64 << 10

// leaderProbe returns a function that asks the leader at an address
// whether it can take the named log's submissions: its /health answer for
// that log, within timeout. The client keeps at most two connections to a
// leader, so a path that hangs holds at most two, however long it hangs.
//
// Why this is safe: the address is the one the lease names, which only a
// process that can write the lease table sets (forwards already go there);
// the answer only feeds /health and the fast refusal of forwards, never a
// signature, and it is read through a 64 KiB limit within timeout, so a
// hostile or broken leader can cost a standby one bounded read per poll.
func leaderProbe(logName string, timeout time.Duration) func(ctx context.Context, address string) error {
	client := &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: timeout}).DialContext,
			MaxConnsPerHost:     2,
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     time.Minute,
		},
	}
	return func(ctx context.Context, address string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(address, "/")+"/health", nil)
		if err != nil {
			return leaderHealth("the leader's address is not a URL", fmt.Errorf("the leader's address %q is not a URL", address))
		}
		resp, err := client.Do(req)
		if err != nil {
			return leaderHealth(fmt.Sprintf("the leader is unreachable (it did not answer its health check within %v)", timeout),
				fmt.Errorf("%w: %s did not answer its health check within %v: %v", ctlog.ErrLeaderUnreachable, address, timeout, err))
		}
		defer resp.Body.Close()
		var status map[string]string
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxHealthBody)).Decode(&status); err != nil {
			return &ctlog.HealthError{Summary: fmt.Sprintf("submissions through this process may fail: the leader answered its health check with HTTP %d and no status", resp.StatusCode),
				Err: fmt.Errorf("the leader at %s answered its health check with HTTP %d and no status", address, resp.StatusCode)}
		}
		switch st, ok := status[logName]; {
		case !ok:
			return leaderHealth("the leader does not serve this log", fmt.Errorf("the leader at %s does not serve this log", address))
		case st != "ok":
			// st is the leader's own /health summary: fixed words.
			return leaderHealth("the leader reports: "+st, fmt.Errorf("the leader at %s reports: %s", address, st))
		}
		return nil
	}
}
