package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
)

// DefaultForwardTimeout bounds one forwarded submission when the Server's
// ForwardTimeout is not set. Package server sets it from the config (the
// longest sequencing period plus 5 s by default).
const DefaultForwardTimeout = 10 * time.Second

// MaxForwardConns bounds the connections a standby opens to the leader.
// They all come from the standby's address, so the leader's per-client
// connection cap must allow this many (package server sees to it).
const MaxForwardConns = 256

// MaxForwardsPerClient is the share of the MaxForwards slots one client
// group (an IPv4 address or IPv6 prefix, as the connection caps group
// clients) may hold: a client holding submissions at the leader, or one
// whose submissions the leader holds for long, takes an eighth of the
// relay, not all of it. A reverse proxy's address (Server.ClientExempt)
// is not held to it.
const MaxForwardsPerClient = MaxForwards / 8

// takeForward takes a forward slot for r's client, or says why not (one
// sentence for the client). release gives it back.
func (s *Server) takeForward(r *http.Request) (release func(), busy string) {
	var key netip.Addr
	perClient := false
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		addr := ap.Addr().Unmap()
		perClient = true
		for _, p := range s.ClientExempt {
			if p.Contains(addr) {
				perClient = false
			}
		}
		key = netlimit.ClientGroup(addr, cmp.Or(s.IPv6ClientPrefix, netlimit.DefaultIPv6Prefix))
	}
	s.forwardMu.Lock()
	defer s.forwardMu.Unlock()
	switch {
	case perClient && s.forwardsBy[key] >= MaxForwardsPerClient:
		return nil, "This client address has as many submissions being relayed to the log's leader as it may; retry later."
	case s.forwarding >= MaxForwards:
		return nil, "This server is relaying as many submissions to the log's leader as it may; retry later."
	}
	s.forwarding++
	if perClient {
		s.forwardsBy[key]++
	}
	return func() {
		s.forwardMu.Lock()
		defer s.forwardMu.Unlock()
		s.forwarding--
		if perClient {
			if s.forwardsBy[key]--; s.forwardsBy[key] == 0 {
				delete(s.forwardsBy, key)
			}
		}
	}, ""
}

// MaxForwards bounds the submissions a standby relays at once (each holds
// one of the MaxForwardConns connections while it waits for the leader's
// round); beyond it a submission gets 503 with Retry-After at once rather
// than queueing for a connection. Together with failing fast while the
// leader is unreachable (ctlog.Log.LeaderUnreachable), this bounds the
// connections a standby opens over a forwarding path that hangs, which
// would otherwise all reach the leader at once when the path heals.
const MaxForwards = MaxForwardConns

// warnInterval is the most often one kind of request-caused warning is
// logged (see package logagg).
const warnInterval = 10 * time.Second

// Why a forward ended before the leader answered.
var (
	errForwardTimeout = errors.New("the leader did not answer within the forward timeout")
	errLeaseMoved     = errors.New("the leader lease moved while the forward was waiting")
)

// relay sends one forwarded submission to leader and reads the answer.
// The attempt is bounded by the forward timeout, and abandoned as soon as
// the lease moves away from leader, so a frozen leader holds a standby's
// submitters for at most the timeout, and not at all once the log has a
// new leader.
func (s *Server) relay(r *http.Request, l *ctlog.Log, leader string, body []byte) (*http.Response, []byte, error) {
	timeout := s.ForwardTimeout
	if timeout <= 0 {
		timeout = DefaultForwardTimeout
	}
	ctx, cancel := context.WithTimeoutCause(r.Context(), timeout, errForwardTimeout)
	defer cancel()
	ctx, moved := context.WithCancelCause(ctx)
	defer moved(nil)
	stop := make(chan struct{})
	defer close(stop)
	go watchLease(l, leader, stop, moved)

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(leader, "/")+r.URL.Path, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("building the forwarded request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ForwardedHeader, "1")
	if ua := r.UserAgent(); ua != "" {
		req.Header.Set("User-Agent", ua)
	}
	resp, err := s.forwardClient.Do(req)
	var out []byte
	if err == nil {
		out, err = io.ReadAll(io.LimitReader(resp.Body, maxForwardedResponse))
		resp.Body.Close()
	}
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errForwardTimeout) {
			return nil, nil, fmt.Errorf("%w (%v)", cause, timeout)
		} else if errors.Is(cause, errLeaseMoved) {
			return nil, nil, cause
		}
		return nil, nil, err
	}
	return resp, out, nil
}

// watchLease calls moved when the lease moves away from leader, until stop
// is closed.
func watchLease(l *ctlog.Log, leader string, stop <-chan struct{}, moved context.CancelCauseFunc) {
	for {
		changed := l.Changed()
		if leaseMoved(l, leader) {
			moved(errLeaseMoved)
			return
		}
		select {
		case <-stop:
			return
		case <-changed:
		}
	}
}

// leaseMoved reports whether the log is no longer led by leader: this
// process sequences it now, or the standby has seen another leader. A
// leader that shows as unknown does not count: that is also how a standby
// shows a lease it failed to read, and a healthy leader must not lose its
// forwards to a database hiccup on the standby.
func leaseMoved(l *ctlog.Log, leader string) bool {
	if l.Sequencer() != nil {
		return true
	}
	next := l.Leader()
	return next != "" && next != leader
}

// FlushWarnings logs the pending summaries of rate-limited warnings, for a
// process that is stopping.
func (s *Server) FlushWarnings() { s.warnings.Flush() }

// ForwardedHeader marks a submission a standby forwarded to the leader. A
// process that is not the leader answers such a request with 503 instead of
// forwarding it again, so two processes that each believe the other leads
// cannot bounce a request between them.
const ForwardedHeader = "Mosaic-Forwarded"

// maxForwardedResponse bounds the leader's response a standby relays; an
// SCT response or an error line is far smaller.
const maxForwardedResponse = 1 << 20

// forward relays a submission to the log's leader and its answer back. The
// leader validates and sequences it; a standby never issues an SCT itself.
//
// Each attempt is bounded by ForwardTimeout and abandoned as soon as the
// lease moves (see relay). If an attempt fails and the lease has moved,
// the submission goes once more to where the log is sequenced now: to the
// new leader, or, if this process has become the leader, back to the
// caller, which handles it here (forward then returns false, having
// written nothing). So a standby relays a submission at most twice, and a
// process never relays one that was relayed to it (ForwardedHeader).
func (s *Server) forward(w http.ResponseWriter, r *http.Request, l *ctlog.Log, body []byte) bool {
	if r.Header.Get(ForwardedHeader) != "" {
		// Relayed here by a process that takes this one for the leader
		// (the lease just moved), or a client setting the header: not
		// relayed again, and not counted as a log without a leader,
		// which nothing here says it is.
		setReason(w, ReasonForwarded)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "This server does not sequence the log right now, and does not relay a submission that was relayed to it; retry later.", http.StatusServiceUnavailable)
		return true
	}
	leader := l.Leader()
	if leader == "" {
		setReason(w, ReasonNoLeader)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "The log has no leader right now (failover in progress); retry later.", http.StatusServiceUnavailable)
		return true
	}
	if err := l.LeaderUnreachable(); err != nil {
		// The standby's latest probe of the leader got no answer: fail
		// fast instead of opening connections over a path that hangs.
		setReason(w, ReasonNoLeader)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "The log's leader is unreachable from this server (failover in progress?); retry later.", http.StatusServiceUnavailable)
		return true
	}
	release, busy := s.takeForward(r)
	if release == nil {
		setReason(w, ReasonForwardBusy)
		w.Header().Set("Retry-After", jitter(1, 3))
		http.Error(w, busy, http.StatusServiceUnavailable)
		return true
	}
	defer release()
	resp, out, err := s.relay(r, l, leader, body)
	if err != nil && r.Context().Err() == nil {
		if l.Sequencer() != nil {
			return false
		}
		if next := l.Leader(); next != "" && next != leader {
			leader = next
			resp, out, err = s.relay(r, l, leader, body)
			if err != nil && r.Context().Err() == nil && l.Sequencer() != nil {
				return false
			}
		}
	}
	if err != nil {
		if r.Context().Err() == nil {
			s.warnings.Warn("forward", "forwarding a submission to the leader failed", "log", l.Name, "leader", leader, "err", err)
		}
		setReason(w, ReasonNoLeader)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "The log's leader is unreachable or did not answer in time (failover in progress?); retry later.", http.StatusServiceUnavailable)
		return true
	}
	for _, h := range []string{"Content-Type", "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	if v := resp.Header.Get(ReasonHeader); resp.StatusCode >= 400 && knownReason(v) {
		if rec, ok := w.(*statusRecorder); ok {
			rec.reason = v // not setReason: this response goes to the client
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(out)
	return true
}
