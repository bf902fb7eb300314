package sequencer

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultTimeout is Config.Timeout's default.
const DefaultTimeout = 5 * time.Second

// ErrCommitDeadline is wrapped by a round's error when the round did not
// move the fence or commit because Config.CommitDeadline had passed: the
// process may no longer be the log's leader.
var ErrCommitDeadline = errors.New("the commit deadline (the end of this process's leader lease, less a margin) has passed")

// commitCtx returns the context a round's fence move and commit run under:
// ctx, ended at Config.CommitDeadline if one is set. It fails without
// doing anything once the deadline has passed.
//
// Why this keeps a leader that lost its lease from committing: the
// deadline is a margin before the earliest moment the lease could pass to
// another process, by this process's conservative clock (the elector
// measures the lease from before the request that took or renewed it). So
// no fence move or commit is started after it, and one in flight is
// abandoned by the client at it. A request the network delivers late is
// not stopped by this; with PostgreSQL as the lock backend the commit
// itself checks the lease on the database's clock (postgres.ReplaceLeased).
func (s *Sequencer) commitCtx(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if s.cfg.CommitDeadline == nil {
		return ctx, func() {}, nil
	}
	d := s.cfg.CommitDeadline()
	if !time.Now().Before(d) {
		return nil, nil, fmt.Errorf("not committing: %w (%s ago)", ErrCommitDeadline, time.Since(d).Round(time.Millisecond))
	}
	cctx, cancel := context.WithDeadlineCause(ctx, d, ErrCommitDeadline)
	return cctx, cancel, nil
}
