package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mosaic-ct/mosaic/internal/base/buildinfo"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
)

// The dashboard: a page per log under its prefix (its parameters, keys,
// links and live figures, refreshed from dashboard.json) and, at "/", a
// list of every log the process serves. Everything it loads is embedded
// in the binary and served from the process itself, so it works offline
// and under a strict Content-Security-Policy: no inline script or style,
// no other origin.

//go:embed web
var webFiles embed.FS

// webPages are the dashboard's HTML templates (html/template escapes every
// value, operator-configured descriptions included).
var webPages = template.Must(template.New("").Funcs(template.FuncMap{
	"digits": groupDigits,
}).ParseFS(webFiles, "web/*.html"))

// AssetPrefix is where the dashboard's static files are served. Their
// names carry a hash of their content, so they can be cached for good.
const AssetPrefix = "/assets/"

// webAsset is one embedded static file.
type webAsset struct {
	path        string // AssetPrefix + name with content hash
	etag        string
	contentType string
	body        []byte
}

// webAssets are the dashboard's static files by name ("dashboard.js").
var webAssets = func() map[string]webAsset {
	out := map[string]webAsset{}
	entries, err := fs.ReadDir(webFiles, "web")
	if err != nil {
		panic(err) // the embedded directory is part of the binary
	}
	for _, e := range entries {
		name := e.Name()
		ext := path.Ext(name)
		if ext == ".html" {
			continue
		}
		body, err := webFiles.ReadFile("web/" + name)
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(body)
		out[name] = webAsset{
			path:        AssetPrefix + strings.TrimSuffix(name, ext) + "." + hex.EncodeToString(sum[:6]) + ext,
			etag:        `"` + hex.EncodeToString(sum[:16]) + `"`,
			contentType: mime.TypeByExtension(ext),
			body:        body,
		}
	}
	return out
}()

// contentSecurityPolicy is the dashboard pages' CSP: scripts, styles,
// images and fetches from this origin only (so no inline script or style,
// and nothing injected into a page could run or send data elsewhere), no
// plugins, no <base> or form target, and no framing (clickjacking).
const contentSecurityPolicy = "default-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// refreshMillis is how often a log's page fetches dashboard.json.
const refreshMillis = 3000

// registerDashboard adds the process-wide parts of the dashboard to mux:
// the static files, and the list of logs at "/" unless a log's page is
// there (homes holds the paths of the logs' pages).
func (s *Server) registerDashboard(mux *http.ServeMux, homes map[string]bool) {
	for _, a := range webAssets {
		mux.HandleFunc("GET "+a.path, func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h.Set("Content-Type", a.contentType)
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("ETag", a.etag)
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
		})
	}
	if !homes["/"] {
		mux.HandleFunc("GET /{$}", s.index)
	}
}

// pageHeaders sets the headers of a dashboard page.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// The figures change all the time: revalidate on every load.
	h.Set("Cache-Control", "no-cache")
}

// render executes a page template into a buffer first, so a failure is a
// clean 500 and not half a page.
func render(w http.ResponseWriter, name string, data any) {
	var b bytes.Buffer
	if err := webPages.ExecuteTemplate(&b, name, data); err != nil {
		http.Error(w, "Rendering the page failed.", http.StatusInternalServerError)
		return
	}
	pageHeaders(w)
	w.Write(b.Bytes())
}

// pageCommon is what every dashboard page has.
type pageCommon struct {
	Title   string
	CSS, JS string // asset paths
	Icon    string
	Version string
	// Index is the path of the list of logs ("" when a log's page is
	// at "/").
	Index string
	// Logs are every log the process serves (on a log's page: shown when
	// there are several).
	Logs []logSummary
}

func (s *Server) common(title string) pageCommon {
	c := pageCommon{
		Title:   title,
		CSS:     webAssets["dashboard.css"].path,
		JS:      webAssets["dashboard.js"].path,
		Icon:    webAssets["favicon.svg"].path,
		Version: buildinfo.Version(),
		Index:   "/",
	}
	now := time.Now()
	for _, l := range s.logs {
		if l.SubmissionPrefix.Path == "/" || (l.ReadPath && l.MonitoringPrefix.Path == "/") {
			c.Index = ""
		}
		c.Logs = append(c.Logs, summarize(l, now))
	}
	return c
}

// logSummary is a log's row in the list of logs.
type logSummary struct {
	Name, Description string
	// Page is the path of the log's page on this process.
	Page      string
	State     string // "usable", "readonly", "retired"
	StateText string
	// Known is false before the log's checkpoint is known; TreeSize and
	// Age are meaningless then.
	Known    bool
	TreeSize int64
	Age      string
	LogJSON  string
}

func summarize(l *ctlog.Log, now time.Time) logSummary {
	st, _ := l.Status(now)
	desc := l.Description
	if desc == "" {
		desc = "Mosaic log " + l.Name
	}
	sum := logSummary{
		Name:        l.Name,
		Description: desc,
		Page:        l.SubmissionPrefix.Path,
		State:       string(st),
		StateText:   stateText[st],
		LogJSON:     l.SubmissionPrefix.Path + "log.v3.json",
	}
	if cp := l.Published(); cp != nil {
		sum.Known = true
		sum.TreeSize = cp.Size
		sum.Age = formatAge(now.Sub(time.UnixMilli(int64(cp.Timestamp))))
	}
	return sum
}

// index serves "/": every log the process serves.
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	c := s.common("Certificate Transparency logs")
	c.Index = "" // this is it
	render(w, "index.html", struct {
		pageCommon
		Now string
	}{c, time.Now().UTC().Format("15:04:05 MST")})
}

// logPage is the data of a log's page.
type logPage struct {
	pageCommon
	Name, Description string
	State, StateText  string
	Since             string
	// Sequencing is true when this process sequences the log, false on
	// a standby.
	Sequencing bool

	SubmissionURL, MonitoringURL, Origin, LogID string
	KeyDER, PEM, VerifierKey                    string
	MLDSAVerifierKey                            string
	Start, End                                  string
	MMD                                         string
	PoolCapacity                                int
	// AcceptedRoots is the number of roots the log accepts now (-1:
	// unknown).
	AcceptedRoots int

	// The figures when the page was made (the script refreshes them).
	Live         point
	Figures      figureText
	CheckpointAt string

	// Links: paths on this process, or the configured URL for what
	// another server serves.
	Checkpoint, LogJSON, GetRoots, Metrics string
	// DashboardJSON is what the page's script fetches (a path on this
	// origin, as the CSP requires).
	DashboardJSON string
	RefreshMillis int
	SampleSeconds int

	// Witnesses is the log's witness policy and each witness's state when
	// the page was made (nil if it has none); see witnessesView.
	Witnesses map[string]any
	// HashIndex says how far the leaf hash index of the RFC 6962 API is
	// built ("" without rfc6962_read_api); see hashIndexText.
	HashIndex string
}

// hashIndexText is the log page's line on the RFC 6962 API's leaf hash
// index, as of the tree size treeSize.
func hashIndexText(ctx context.Context, l *ctlog.Log, treeSize int64) string {
	if !l.RFC6962ReadAPI || l.HashIndex == nil {
		return ""
	}
	n, err := l.HashIndexed(ctx)
	switch {
	case err != nil:
		return "its progress cannot be read now"
	case n >= treeSize:
		return fmt.Sprintf("complete: get-proof-by-hash finds all %s entries", groupDigits(treeSize))
	default:
		return fmt.Sprintf("backfilling: %s of %s entries indexed (%.1f%%); until then get-proof-by-hash answers 503 for entries it does not find",
			groupDigits(n), groupDigits(treeSize), 100*float64(n)/float64(treeSize))
	}
}

// figureText is the live figures as the page shows them (dashboard.js
// formats them the same way).
type figureText struct {
	TreeSize, EntriesPerSecond, RoundDuration, PoolFill, CheckpointAge string
	Refused429, Refused503, Refused4xx, RefusalReasons                 string
}

// dashboardPage serves a log's page (its prefix itself).
func (s *Server) dashboardPage(l *ctlog.Log) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		ld := s.dash.byLg[l]
		cur, _, rd, poolCap, ok := ld.live(now)
		if !ok {
			w.Header().Set("Retry-After", "5")
			http.Error(w, "The log's state is not known yet; retry later.", http.StatusServiceUnavailable)
			return
		}
		vkey, err := checkpoint.Ed25519VerifierKey(l.Origin, l.Keys.Ed25519Public())
		if err != nil {
			http.Error(w, "The log's note verifier key could not be encoded.", http.StatusInternalServerError)
			return
		}
		st, since := l.Status(now)
		sinceText := ""
		if !since.IsZero() {
			sinceText = since.UTC().Format(time.RFC3339)
		}
		der := base64.StdEncoding.EncodeToString(l.Keys.PublicKeyDER())
		p := logPage{
			pageCommon:    s.common(l.Name + " — Mosaic CT log"),
			Name:          l.Name,
			Description:   l.DescriptionText(),
			State:         string(st),
			StateText:     stateText[st],
			Witnesses:     witnessesView(l),
			Since:         sinceText,
			Sequencing:    rd.sequencing,
			SubmissionURL: l.SubmissionPrefix.String(),
			MonitoringURL: l.MonitoringPrefix.String(),
			Origin:        l.Origin,
			LogID:         l.LogIDBase64(),
			KeyDER:        der,
			PEM:           pemBlock("PUBLIC KEY", der),
			VerifierKey:   vkey,
			// The ML-DSA-44 cosignature's vkey, next to the Ed25519 one.
			MLDSAVerifierKey: checkpoint.MLDSA44VerifierKey(l.Origin, l.Keys.MLDSA44.PublicKey()),
			Start:            l.NotAfterStart.UTC().Format(time.RFC3339),
			End:              l.NotAfterLimit.UTC().Format(time.RFC3339),
			MMD:              fmt.Sprintf("%d seconds (%s)", int64(l.MMD/time.Second), l.MMD.Truncate(time.Second)),
			PoolCapacity:     poolCap,
			AcceptedRoots:    rd.roots,
			Live:             cur,
			Figures:          figures(cur),
			CheckpointAt:     rd.cpTime.UTC().Format(time.RFC3339),
			LogJSON:          l.SubmissionPrefix.Path + "log.v3.json",
			GetRoots:         l.SubmissionPrefix.Path + "ct/v1/get-roots",
			Metrics:          "/metrics",
			DashboardJSON:    "dashboard.json",
			RefreshMillis:    refreshMillis,
			SampleSeconds:    int(SampleInterval / time.Second),
			HashIndex:        hashIndexText(r.Context(), l, cur.TreeSize),
		}
		if len(p.Logs) < 2 {
			p.Logs = nil
		}
		if l.ReadPath {
			p.Checkpoint = l.MonitoringPrefix.Path + "checkpoint"
		} else {
			p.Checkpoint = l.MonitoringPrefix.String() + "checkpoint"
		}
		render(w, "log.html", p)
	}
}

// dashboardDoc is dashboard.json: a log's live figures and the last
// hour's samples, oldest first.
type dashboardDoc struct {
	Name       string `json:"name"`
	State      string `json:"state"`
	StateSince string `json:"state_since,omitempty"`
	// Sequencing is true when this process sequences the log (round
	// duration and pool fill are this process's), false on a standby.
	Sequencing            bool    `json:"sequencing"`
	PoolCapacity          int     `json:"pool_capacity"`
	SampleIntervalSeconds float64 `json:"sample_interval_seconds"`
	// AcceptedRoots is the number of roots the log accepts now (what
	// get-roots serves; -1 if unknown).
	AcceptedRoots int `json:"accepted_roots"`
	// Version is the running build's version (buildinfo.Version).
	Version string  `json:"version"`
	Now     point   `json:"now"`
	History []point `json:"history"`
	// Witnesses is each witness's state: see WitnessState.
	Witnesses []WitnessState `json:"witnesses"`
}

// WitnessState is one witness's state as the dashboard shows it.
type WitnessState struct {
	Name  string `json:"name"`
	URL   string `json:"url"`
	State string `json:"state"`
	// CosignedSize is the tree size of the latest checkpoint it cosigned
	// (-1 if unknown).
	CosignedSize int64  `json:"cosigned_size"`
	LastSuccess  string `json:"last_success"`
	Latency      string `json:"latency"`
}

// witnesses returns the state of l's witnesses (an empty list if it has
// none).
func witnesses(l *ctlog.Log) []WitnessState {
	out := []WitnessState{}
	v := witnessesView(l)
	if v == nil {
		return out
	}
	for _, w := range v["List"].([]witnessView) {
		out = append(out, WitnessState{Name: w.Name, URL: w.URL, State: w.State, CosignedSize: w.Size,
			LastSuccess: w.LastSuccess, Latency: w.Latency})
	}
	return out
}

// dashboardJSON serves a log's dashboard.json.
func (s *Server) dashboardJSON(l *ctlog.Log) http.HandlerFunc {
	ld := s.dash.byLg[l]
	return func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		ld.mu.Lock()
		doc, docGzip := ld.doc, ld.docGzip
		if now.Sub(ld.docAt) >= docTTL || now.Before(ld.docAt) {
			doc = nil
		}
		ld.mu.Unlock()
		if doc == nil {
			var err error
			if doc, err = ld.build(now); err != nil {
				w.Header().Set("Retry-After", "5")
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			zw.Write(doc)
			zw.Close()
			docGzip = b.Bytes()
			ld.mu.Lock()
			ld.doc, ld.docGzip, ld.docAt = doc, docGzip, now
			ld.mu.Unlock()
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "public, max-age=1")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			h.Set("Content-Encoding", "gzip")
			doc = docGzip
		}
		h.Set("Content-Length", strconv.Itoa(len(doc)))
		w.Write(doc)
	}
}

// build encodes the log's dashboard.json as of now.
func (ld *logDash) build(now time.Time) ([]byte, error) {
	cur, history, rd, poolCap, ok := ld.live(now)
	if !ok {
		return nil, fmt.Errorf("the log's state is not known yet; retry later")
	}
	st, since := ld.log.Status(now)
	d := dashboardDoc{
		Name:                  ld.log.Name,
		State:                 string(st),
		Sequencing:            rd.sequencing,
		PoolCapacity:          poolCap,
		SampleIntervalSeconds: SampleInterval.Seconds(),
		AcceptedRoots:         rd.roots,
		Version:               buildinfo.Version(),
		Now:                   cur,
		History:               history,
		Witnesses:             witnesses(ld.log),
	}
	if !since.IsZero() {
		d.StateSince = since.UTC().Format(time.RFC3339)
	}
	return json.Marshal(d)
}

// figures formats p as the page shows it.
func figures(p point) figureText {
	f := figureText{
		TreeSize:         groupDigits(p.TreeSize),
		CheckpointAge:    formatAge(time.Duration(p.CheckpointAgeSeconds * float64(time.Second))),
		EntriesPerSecond: "—",
		RoundDuration:    "—",
		PoolFill:         "—",
		Refused429:       "—",
		Refused503:       "—",
		Refused4xx:       "—",
		RefusalReasons:   formatReasons(p.RefusedByReason),
	}
	for dst, r := range map[*string]*float64{&f.EntriesPerSecond: p.EntriesPerSecond,
		&f.Refused429: p.Refused429PerSecond, &f.Refused503: p.Refused503PerSecond, &f.Refused4xx: p.Refused4xxPerSecond} {
		if r != nil {
			*dst = formatRate(*r)
		}
	}
	if p.RoundDurationSeconds != nil {
		f.RoundDuration = formatSeconds(*p.RoundDurationSeconds)
	}
	if p.PoolFill != nil {
		f.PoolFill = formatPercent(*p.PoolFill)
	}
	return f
}

// maxReasonsShown is how many refusal reasons the page names.
const maxReasonsShown = 3

// formatReasons names the reasons with the highest refusal rates, highest
// first: "pool_full 3.2/s, client_rate 1.0/s", or "none".
func formatReasons(rates map[string]float64) string {
	reasons := make([]string, 0, len(rates))
	for r := range rates {
		reasons = append(reasons, r)
	}
	slices.SortFunc(reasons, func(a, b string) int {
		if rates[a] != rates[b] {
			if rates[a] > rates[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	if len(reasons) == 0 {
		return "none"
	}
	parts := make([]string, 0, maxReasonsShown)
	for _, r := range reasons[:min(len(reasons), maxReasonsShown)] {
		parts = append(parts, r+" "+formatRate(rates[r])+"/s")
	}
	return strings.Join(parts, ", ")
}

// groupDigits writes n with comma thousands separators.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func formatRate(r float64) string {
	if r < 10 {
		return strconv.FormatFloat(r, 'f', 1, 64)
	}
	return groupDigits(int64(r + 0.5))
}

func formatSeconds(s float64) string {
	switch {
	case s < 0.01:
		return strconv.FormatFloat(s*1000, 'f', 1, 64) + " ms"
	case s < 1:
		return strconv.FormatFloat(s*1000, 'f', 0, 64) + " ms"
	default:
		return strconv.FormatFloat(s, 'f', 2, 64) + " s"
	}
}

func formatPercent(f float64) string {
	if f < 0.1 {
		return strconv.FormatFloat(f*100, 'f', 1, 64) + " %"
	}
	return strconv.FormatFloat(f*100, 'f', 0, 64) + " %"
}

func formatAge(d time.Duration) string {
	s := max(0, d.Seconds())
	switch {
	case s < 60:
		return strconv.FormatFloat(s, 'f', 1, 64) + " s"
	case s < 3600:
		return fmt.Sprintf("%d min %d s", int(s)/60, int(s)%60)
	default:
		return fmt.Sprintf("%d h %d min", int(s)/3600, int(s)%3600/60)
	}
}

// pemBlock wraps base64 data at 64 columns between PEM armor lines.
func pemBlock(kind, b64 string) string {
	var b strings.Builder
	b.WriteString("-----BEGIN " + kind + "-----\n")
	for len(b64) > 64 {
		b.WriteString(b64[:64] + "\n")
		b64 = b64[64:]
	}
	b.WriteString(b64 + "\n-----END " + kind + "-----")
	return b.String()
}
