package mirror

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/state/storage"
)

// Handler serves the mirror under the URL path prefix (ending in "/"):
// POST add-checkpoint and add-entries (the submission prefix), and GET
// <origin hash>/checkpoint and <origin hash>/tile/... (the monitoring
// prefix: the same one).
func (m *Mirror) Handler(prefix string) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, prefix)
		if !ok {
			http.NotFound(rw, r)
			return
		}
		switch rest {
		case "add-checkpoint", "add-entries", "sign-subtree":
			// Each costs the mirror signature checks, hashing or a
			// signature of its own: one address must not be able to
			// spend the mirror's CPU for everyone (reads are served
			// from storage and cost far less).
			if !m.allow(rw, r, rest) {
				return
			}
		}
		switch rest {
		case "add-checkpoint":
			m.serveAddCheckpoint(rw, r)
		case "add-entries":
			m.serveAddEntries(rw, r)
		case "sign-subtree":
			m.serveSignSubtree(rw, r)
		default:
			m.serveRead(rw, r, rest)
		}
	})
}

// allow applies the client's rate limit to a request to endpoint, or
// answers it with 429 and a Retry-After.
func (m *Mirror) allow(rw http.ResponseWriter, r *http.Request, endpoint string) bool {
	retryAfter, ok := m.limit.AllowRemote(r.RemoteAddr)
	if !ok {
		rw.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		m.answer(rw, endpoint, nil, refuse(http.StatusTooManyRequests, "This client address is over the mirror's request rate limit; retry later."))
	}
	return ok
}

// Owns reports whether path is one of the mirror's under prefix.
func (m *Mirror) Owns(prefix, path string) bool {
	rest, ok := strings.CutPrefix(path, prefix)
	if !ok {
		return false
	}
	if rest == "add-checkpoint" || rest == "add-entries" || rest == "sign-subtree" {
		return true
	}
	h, _, _ := strings.Cut(rest, "/")
	return m.byHash[h] != nil
}

func (m *Mirror) answer(rw http.ResponseWriter, endpoint string, body []byte, err error) {
	code := http.StatusOK
	if err != nil {
		var ref *refusal
		if !errors.As(err, &ref) {
			m.log.Warn("mirror request failed", "endpoint", endpoint, "err", err)
			ref = &refusal{code: http.StatusServiceUnavailable, msg: "The mirror could not store the update; retry later."}
			rw.Header().Set("Retry-After", "5")
		}
		code = ref.code
		body = ref.body
		if body == nil {
			body = []byte(ref.msg + "\n")
			rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		} else {
			rw.Header().Set("Content-Type", ref.ctype)
		}
	} else {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	m.metrics.requests.WithLabelValues(endpoint, strconv.Itoa(code)).Inc()
	rw.WriteHeader(code)
	rw.Write(body)
}

func (m *Mirror) serveAddCheckpoint(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", "POST")
		m.answer(rw, "add-checkpoint", nil, refuse(http.StatusMethodNotAllowed, "Use POST."))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxCheckpointBody+1))
	if err != nil {
		m.answer(rw, "add-checkpoint", nil, refuse(http.StatusBadRequest, "The request body could not be read."))
		return
	}
	if len(body) > maxCheckpointBody {
		m.answer(rw, "add-checkpoint", nil, refuse(http.StatusRequestEntityTooLarge, "The body is larger than %d bytes.", maxCheckpointBody))
		return
	}
	recorded, err := m.addCheckpoint(r.Context(), body)
	if recorded {
		// The client moved the log's pending checkpoint with one signed
		// by the log: it does the log's work (a pusher), and keeps a
		// rate-limit bucket of its own however many clients compete
		// (netlimit.ClientLimiter.Pin).
		m.limit.PinRemote(r.RemoteAddr)
	}
	m.answer(rw, "add-checkpoint", nil, err)
}

func (m *Mirror) serveAddEntries(rw http.ResponseWriter, r *http.Request) {
	rw.Header().Set("Accept-Encoding", "gzip")
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", "POST")
		m.answer(rw, "add-entries", nil, refuse(http.StatusMethodNotAllowed, "Use POST."))
		return
	}
	// The body is read under a deadline from the start: first the
	// header, within headerTimeout, before any upload slot is taken (see
	// upload.go for why this keeps slots for clients that send).
	ctrl := http.NewResponseController(rw)
	// A refusal before the body's end closes the connection: net/http
	// would otherwise read what is left of the body (up to 256 KiB)
	// before answering, holding the answer until the client sends it.
	closeWith := func(err error) {
		rw.Header().Set("Connection", "close")
		m.answer(rw, "add-entries", nil, err)
	}
	rr := &rateReader{r: r.Body, now: time.Now, slack: m.uploads.headerTimeout, maxSlack: m.uploads.headerTimeout,
		setDeadline: func(t time.Time) error {
			if err := ctrl.SetReadDeadline(t); errors.Is(err, http.ErrNotSupported) {
				return errNoDeadline
			} else {
				return err
			}
		}}
	var body io.Reader = rr
	switch r.Header.Get("Content-Encoding") {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(rr)
		if errors.Is(err, errTooSlow) {
			closeWith(refuse(http.StatusRequestTimeout, "The upload header did not arrive within %s.", m.uploads.headerTimeout))
			return
		}
		if err != nil {
			closeWith(refuse(http.StatusBadRequest, "The gzip body is malformed."))
			return
		}
		defer zr.Close()
		body = zr
	default:
		closeWith(refuse(http.StatusUnsupportedMediaType, "The body's Content-Encoding is not gzip."))
		return
	}
	br := bufio.NewReaderSize(body, 64<<10)
	h, err := readEntriesHeader(br)
	if errors.Is(err, errTooSlow) {
		closeWith(refuse(http.StatusRequestTimeout, "The upload header did not arrive within %s.", m.uploads.headerTimeout))
		return
	}
	if err != nil {
		closeWith(refuse(http.StatusBadRequest, "%s.", capitalize(err.Error())))
		return
	}
	l, target, err := m.checkEntriesHeader(h)
	if err != nil {
		closeWith(err)
		return
	}
	var client netip.Addr
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		client = ap.Addr()
	}
	release, busy := m.uploads.take(client, l)
	if release == nil {
		rw.Header().Set("Retry-After", "1")
		closeWith(refuse(http.StatusServiceUnavailable, "%s", busy))
		return
	}
	defer release()
	rr.limitRate(m.uploads.minRate, m.uploads.grace)
	lines, err := m.addEntries(r.Context(), br, h, l, target)
	// The server's write timeout counts from the request's head, and an
	// upload at the minimum rate may outlast it: the answer, a few lines,
	// gets its own.
	_ = ctrl.SetWriteDeadline(time.Now().Add(answerTimeout))
	var ref *refusal
	if err != nil && (!errors.As(err, &ref) || (ref.code != http.StatusAccepted && ref.code != http.StatusConflict)) {
		// Refused in the middle of the body (or the storage failed).
		closeWith(err)
		return
	}
	m.answer(rw, "add-entries", lines, err)
}

// serveRead serves a log's checkpoint and tiles, read-only.
func (m *Mirror) serveRead(rw http.ResponseWriter, r *http.Request, rest string) {
	h, key, _ := strings.Cut(rest, "/")
	l := m.byHash[h]
	if l == nil || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.NotFound(rw, r)
		return
	}
	data := false
	switch {
	case key == "checkpoint":
	case strings.HasPrefix(key, "issuer/") && l.format == StaticCT:
		if h := strings.TrimPrefix(key, "issuer/"); len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
			http.NotFound(rw, r)
			return
		}
	case strings.HasPrefix(key, "tile/entries/") && l.format == TlogTiles:
		t, err := tile.ParsePath("tile/data/" + strings.TrimPrefix(key, "tile/entries/"))
		if err != nil || !t.Data {
			http.NotFound(rw, r)
			return
		}
		data = true
	default:
		t, err := tile.ParsePath(key)
		if err != nil || (t.Data && l.format != StaticCT) {
			http.NotFound(rw, r)
			return
		}
		data = t.Data
	}
	b, err := l.st.Get(r.Context(), key)
	if errors.Is(err, storage.ErrNotFound) {
		http.NotFound(rw, r)
		return
	}
	if err != nil {
		rw.Header().Set("Retry-After", "5")
		http.Error(rw, "The mirror's storage did not answer; retry later.", http.StatusServiceUnavailable)
		return
	}
	opts := storage.Options(key)
	rw.Header().Set("Content-Type", opts.ContentType)
	if opts.Immutable {
		rw.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		rw.Header().Set("Cache-Control", "no-cache")
	}
	if data && l.format == StaticCT {
		rw.Header().Add("Vary", "Accept-Encoding")
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			if b, err = tile.Gunzip(b); err != nil {
				http.Error(rw, "The stored tile is damaged.", http.StatusInternalServerError)
				return
			}
		} else {
			rw.Header().Set("Content-Encoding", "gzip")
		}
	}
	rw.Write(b)
}
