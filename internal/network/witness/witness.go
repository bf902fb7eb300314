// Package witness gets a log's checkpoints cosigned by witnesses
// (c2sp.org/tlog-witness, c2sp.org/tlog-cosignature) and publishes them.
//
// A Publisher is the sequencer's sequencer.Publisher: each round hands it
// the checkpoint it committed, and the Publisher, in its own goroutine,
// sends the newest one to every witness with a consistency proof from the
// size that witness last cosigned, waits at most Config.Timeout for their
// cosignatures, and publishes the checkpoint to storage with those that
// arrived. Rounds never wait for it, so a witness that is down or slow only
// costs its cosignature (and delays the public checkpoint by at most
// Timeout), never an SCT. Checkpoints that arrive while a cycle runs are
// coalesced: witnesses see the newest.
//
// Witnesses are outside services and are not trusted: only cosignature
// lines that verify with the configured witness key are kept, responses are
// size-bounded, and a witness's answer can never change the log's own
// signatures or the tree head.
package witness

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
)

// maxResponse bounds a witness's response body: a few signature lines.
const maxResponse = 64 << 10

// maxProofLines is the longest consistency proof add-checkpoint accepts.
const maxProofLines = 63

// Witness is one configured witness.
type Witness struct {
	// Name labels the witness in metrics, logs and the home page; empty
	// means the key's name.
	Name string
	// URL is the witness's submission prefix: requests go to
	// URL + "add-checkpoint".
	URL string
	// Keys are the witness's cosignature verifier keys (vkeys), all of
	// one name: Ed25519 cosignature/v1 (type 0x04) and/or ML-DSA-44
	// (type 0x06). A response counts when it carries a valid cosignature
	// by at least one of them; every valid one is kept.
	Keys []string
}

// Status is what the log knows of one witness, for the home page.
type Status struct {
	Name, URL string
	// Size is the tree size the witness last cosigned for this log (-1 if
	// unknown).
	Size int64
	// LastSuccess and LastAttempt are zero if there was none.
	LastSuccess, LastAttempt time.Time
	// LastError is why the latest attempt failed ("" if it succeeded).
	LastError string
	// Latency is how long the latest attempt took.
	Latency time.Duration
}

// client talks to one witness.
type client struct {
	name, url string
	keyName   string         // the name of the witness's keys
	verifiers note.Verifiers // Ed25519 and/or ML-DSA-44 (checkpoint.ParseCosignerKey)
	hc        *http.Client
	metrics   *metrics

	mu     sync.Mutex
	known  int64 // the size the witness last cosigned; -1 unknown
	status Status
}

// errConflict is an add-checkpoint 409: the witness holds another size.
type errConflict struct{ size int64 }

func (e *errConflict) Error() string {
	return fmt.Sprintf("the witness holds tree size %d", e.size)
}

// prover returns a consistency proof from tree size old to the tree of the
// checkpoint being cosigned.
type prover func(old int64) (tlog.TreeProof, error)

// cosign asks the witness to cosign the checkpoint signed (of tree cp) and
// returns the verified cosignature lines. On a 409 it resends once from the
// size the witness reports, as c2sp.org/tlog-witness says.
func (c *client) cosign(ctx context.Context, signed []byte, cp *checkpoint.Verified, prove prover) ([]byte, error) {
	start := time.Now()
	c.mu.Lock()
	old := c.known
	c.mu.Unlock()
	if old < 0 || old > cp.Size {
		// Unknown: the spec lets a client start from 0 to learn the
		// witness's size (a 409 names it).
		old = 0
	}
	lines, err := c.addCheckpoint(ctx, signed, cp, old, prove)
	var conflict *errConflict
	if errors.As(err, &conflict) {
		c.metrics.requests.WithLabelValues(c.name, "conflict").Inc()
		c.mu.Lock()
		c.known = conflict.size
		c.mu.Unlock()
		if conflict.size <= cp.Size {
			lines, err = c.addCheckpoint(ctx, signed, cp, conflict.size, prove)
		} else {
			err = fmt.Errorf("%w, larger than the log's %d: it has seen a checkpoint this log did not publish, or the log's state was rolled back", err, cp.Size)
		}
	}
	elapsed := time.Since(start)
	c.metrics.latency.WithLabelValues(c.name).Observe(elapsed.Seconds())
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status.LastAttempt, c.status.Latency = start, elapsed
	if err != nil {
		result := "error"
		if ctx.Err() != nil {
			result = "timeout"
			err = fmt.Errorf("no answer within the witness timeout: %w", err)
		}
		c.metrics.requests.WithLabelValues(c.name, result).Inc()
		c.status.LastError = err.Error()
		return nil, err
	}
	c.metrics.requests.WithLabelValues(c.name, "ok").Inc()
	c.metrics.size.WithLabelValues(c.name).Set(float64(cp.Size))
	c.known = cp.Size
	c.status.LastSuccess, c.status.LastError = time.Now(), ""
	return lines, nil
}

// addCheckpoint sends one add-checkpoint request.
func (c *client) addCheckpoint(ctx context.Context, signed []byte, cp *checkpoint.Verified, old int64, prove prover) ([]byte, error) {
	var body bytes.Buffer
	fmt.Fprintf(&body, "old %d\n", old)
	if old > 0 && old < cp.Size {
		proof, err := prove(old)
		if err != nil {
			return nil, fmt.Errorf("computing the consistency proof from %d to %d: %w", old, cp.Size, err)
		}
		if len(proof) > maxProofLines {
			return nil, fmt.Errorf("consistency proof has %d hashes, more than add-checkpoint allows", len(proof))
		}
		for _, h := range proof {
			body.WriteString(base64.StdEncoding.EncodeToString(h[:]) + "\n")
		}
	}
	body.WriteString("\n")
	body.Write(signed)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"add-checkpoint", &body)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, fmt.Errorf("reading the response: %w", err)
	}
	if len(b) > maxResponse {
		return nil, fmt.Errorf("response is larger than %d bytes", maxResponse)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusConflict:
		size, err := strconv.ParseInt(strings.TrimSuffix(string(b), "\n"), 10, 64)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("409 Conflict without a tree size in the body")
		}
		return nil, &errConflict{size: size}
	default:
		first, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		if len(first) > 200 {
			first = first[:200]
		}
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.ToValidUTF8(first, "?"))
	}
	return c.verify(signed, b)
}

// verify keeps the response's signature lines that are valid cosignatures
// by this witness's key on signed, as the spec suggests: append them to the
// note and open it with the witness's verifier.
func (c *client) verify(signed, resp []byte) ([]byte, error) {
	for _, l := range strings.SplitAfter(string(resp), "\n") {
		if l != "" && (!strings.HasPrefix(l, "— ") || !strings.HasSuffix(l, "\n")) {
			return nil, errors.New("response is not a list of note signature lines")
		}
	}
	// Only lines with this witness's name and one of its key IDs reach
	// its verifiers, each of which checks its own algorithm's exact
	// signature length, so an Ed25519 line never counts for an ML-DSA-44
	// key nor the reverse. note.Open verifies one key at most once
	// however many lines repeat it, so a hostile witness costs at most
	// one verification per key per response (which maxResponse also
	// bounds); a line by one of its keys that does not verify fails the
	// whole response.
	n, err := note.Open(append(bytes.Clone(signed), resp...), c.verifiers)
	if err != nil {
		return nil, fmt.Errorf("no valid cosignature by %s in the response: %w", c.keyName, err)
	}
	var lines []byte
	for _, s := range n.Sigs {
		lines = fmt.Appendf(lines, "— %s %s\n", s.Name, s.Base64)
	}
	return lines, nil
}

func (c *client) snapshot() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.status
	s.Size = c.known
	return s
}
