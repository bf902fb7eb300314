package httpapi

// The submission endpoints: add-chain, add-pre-chain and get-roots.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"time"

	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
)

// SubmissionPaths returns the request paths of every log's add-chain and
// add-pre-chain, the requests a plain-HTTP listener may serve on its lean
// path (package leanhttp) through Handler.
func (s *Server) SubmissionPaths() map[string]bool {
	paths := make(map[string]bool, 2*len(s.logs))
	for _, l := range s.logs {
		paths[addChainPath(l, false)] = true
		paths[addChainPath(l, true)] = true
	}
	return paths
}

// addChainPath is the path of l's add-chain, or add-pre-chain if precert:
// the one place both the routes and SubmissionPaths take it from.
func addChainPath(l *ctlog.Log, precert bool) string {
	if precert {
		return l.SubmissionPrefix.Path + "ct/v1/add-pre-chain"
	}
	return l.SubmissionPrefix.Path + "ct/v1/add-chain"
}

// maxBodyHint bounds how much readBody allocates on the strength of a
// request's Content-Length before the bytes arrive. An add-chain body is a
// few kilobytes; a client that announces 512 KiB and sends nothing must
// not make each of its connections hold that much.
const maxBodyHint = 16 << 10

// readBody reads r to the end, like io.ReadAll, into buf if it has room
// for the request's Content-Length and otherwise into a new buffer of that
// size (at most maxBodyHint; io.ReadAll starts at 512 bytes and grows by
// copying, five times for a typical chain).
func readBody(r io.Reader, contentLength int64, buf []byte) ([]byte, error) {
	hint := min(max(contentLength, 512), maxBodyHint)
	b := buf[:0]
	if int64(cap(b)) < hint+1 {
		b = make([]byte, 0, hint+1) // +1: the read that reports EOF needs room
	}
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// addChainRequest is the RFC 6962 §4.1 request body.
type addChainRequest struct {
	Chain []string `json:"chain"`
}

// maxPooledBody is the largest body buffer kept for reuse: no more than
// readBody allocates up front, so that a connection that announces a large
// body and sends nothing still holds at most maxBodyHint bytes.
const maxPooledBody = maxBodyHint + 1

// getBody returns a buffer for an add-chain body from the pool (empty if
// the pool is), to be given back with putBody.
func (s *Server) getBody() *[]byte {
	if b, ok := s.bodies.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

// putBody gives b, now holding body, back to the pool. The caller must
// hold no reference into body any more.
func (s *Server) putBody(b *[]byte, body []byte) {
	if cap(body) <= maxPooledBody {
		*b = body[:0]
		s.bodies.Put(b)
	}
}

func (s *Server) addChain(l *ctlog.Log, precert bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := s.getBody()
		body, err := readBody(http.MaxBytesReader(w, r.Body, MaxBodyBytes), r.ContentLength, *buf)
		if err != nil {
			var mbe *http.MaxBytesError
			setReason(w, ReasonMalformed)
			if errors.As(err, &mbe) {
				http.Error(w, fmt.Sprintf("The request body is larger than %d bytes.", MaxBodyBytes), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "The request body could not be read to the end.", http.StatusBadRequest)
			return
		}
		if refuseReadOnly(w, l.CheckWritable(time.Now())) {
			return
		}
		// The client's rate limit, before any work is spent on the
		// submission; a standby applies it too, since the leader sees
		// only the standby's address.
		if r.Header.Get(ForwardedHeader) != "" && l.Sequencer() != nil && l.ClientLimits.Limits(clientAddr(r)) {
			// The leader would count all of a standby's clients as
			// one: say so (the header may be a client's, so this is a
			// warning, rate-limited, never a decision).
			s.warnings.Warn("forwarded-limited", "a submission relayed by a standby counts against one client's rate limit, shared by all the standby's clients: add the other processes' addresses to limits.per_client_exempt",
				"log", l.Name, "from", r.RemoteAddr)
		}
		if err := l.AdmitClient(clientAddr(r), precert); err != nil {
			s.putBody(buf, body)
			s.writeAddChainError(w, r, l, err)
			return
		}
		forwarded := false
		if l.Sequencer() == nil {
			if s.forward(w, r, l, body) {
				return
			}
			// The relay failed and this process now leads. The HTTP
			// client may still be reading the body in another goroutine
			// (an http.RoundTripper may use the request body after Do
			// returns), so its buffer must not be reused.
			forwarded = true
		}
		// Parsing keeps at most one certificate more than the log
		// accepts, so a body of many tiny strings costs no more than a
		// short chain (TestLongChainBoundedAllocation).
		maxChain := l.Validator.MaxChainLength()
		chainDER, ok := parseAddChainFast(body, maxChain)
		if !ok {
			chainDER, ok = decodeAddChain(w, body, maxChain)
		}
		// Both parsers decode the chain into memory of its own (checked by
		// TestParsedChainOwnsItsMemory), so the body can be reused now
		// rather than held, with thousands of others, until the round
		// that answers this submission.
		if !forwarded {
			s.putBody(buf, body)
		}
		if !ok {
			return
		}
		if len(chainDER) == 0 {
			setReason(w, ReasonMalformed)
			http.Error(w, "The request has no certificates: \"chain\" is missing or empty.", http.StatusBadRequest)
			return
		}
		if len(chainDER) > maxChain {
			setReason(w, ReasonPolicy)
			http.Error(w, tooLongMessage(maxChain), http.StatusBadRequest)
			return
		}
		resp, err := l.AddChain(r.Context(), chainDER, precert)
		if refuseReadOnly(w, err) {
			return
		}
		if err != nil {
			s.writeAddChainError(w, r, l, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(resp.AppendJSON(make([]byte, 0, 256)))
	})
}

// tooLongMessage is the refusal of a chain longer than maxChain, whose
// length the parsers do not count to the end.
func tooLongMessage(maxChain int) string {
	return fmt.Sprintf("The chain has more certificates than the log accepts (at most %d).", maxChain)
}

// boundedRequest is addChainRequest keeping at most limit+1 certificates.
type boundedRequest struct {
	Chain boundedChain `json:"chain"`
}

// boundedChain is a JSON array of strings of which UnmarshalJSON keeps the
// first limit+1: encoding/json has checked the whole body's syntax before
// it calls UnmarshalJSON, which then reads elements one at a time and stops
// there, so a body of many tiny strings costs no slice entry each.
type boundedChain struct {
	limit int
	certs []string
}

func (c *boundedChain) UnmarshalJSON(b []byte) error {
	c.certs = nil
	if string(b) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return errors.New("chain is not an array")
	}
	for dec.More() && len(c.certs) <= c.limit {
		var s string
		if err := dec.Decode(&s); err != nil {
			return err
		}
		c.certs = append(c.certs, s)
	}
	return nil
}

// clientAddr is the address of the client that sent r (the connection's
// peer; invalid if r.RemoteAddr is not an address, as for a handler
// called without a network).
func clientAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr()
}

// decodeAddChain decodes an add-chain request body with encoding/json (the
// form parseAddChainFast does not take), keeping at most limit+1
// certificates, and answers a malformed one with a 400 and one plain
// sentence.
func decodeAddChain(w http.ResponseWriter, body []byte, limit int) ([][]byte, bool) {
	req := boundedRequest{Chain: boundedChain{limit: limit}}
	if err := json.Unmarshal(body, &req); err != nil {
		setReason(w, ReasonMalformed)
		// Not err.Error(): encoding/json's messages name Go types
		// ("cannot unmarshal number into Go value of type []string").
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			http.Error(w, fmt.Sprintf("The request body is not valid JSON (syntax error at byte %d).", syntax.Offset), http.StatusBadRequest)
			return nil, false
		}
		http.Error(w, "The request body must be a JSON object whose \"chain\" is an array of base64-encoded certificates.", http.StatusBadRequest)
		return nil, false
	}
	chainDER := make([][]byte, len(req.Chain.certs))
	for i, c := range req.Chain.certs {
		var err error
		if chainDER[i], err = base64.StdEncoding.DecodeString(c); err != nil {
			setReason(w, ReasonMalformed)
			http.Error(w, fmt.Sprintf("The certificate at chain[%d] is not valid base64.", i), http.StatusBadRequest)
			return nil, false
		}
	}
	return chainDER, true
}

func (s *Server) getRoots(l *ctlog.Log) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var resp struct {
			Certificates []string `json:"certificates"`
		}
		resp.Certificates = []string{}
		if l.Validator == nil {
			// An archived log (served from `mosaic archive`'s file)
			// accepts nothing and keeps no roots.
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, "This log is archived: it accepts no submissions and serves no roots.", http.StatusGone)
			return
		}
		for _, der := range l.Validator.RootsDER() {
			resp.Certificates = append(resp.Certificates, base64.StdEncoding.EncodeToString(der))
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", cacheRoots)
		json.NewEncoder(w).Encode(resp)
	}
}
