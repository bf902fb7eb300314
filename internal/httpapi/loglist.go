package httpapi

import (
	"encoding/base64"
	"errors"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/mosaic-ct/mosaic/internal/ctlog"
	"github.com/mosaic-ct/mosaic/internal/loglist"
)

// Operator is who runs a process's logs, for /logs.v3.json.
type Operator struct {
	// Name defaults to the host of the first log's submission prefix.
	Name  string
	Email []string
}

// ReadOnlyStatus is the status a submission to a read-only or retired log
// gets: 410 Gone, because the submission endpoint is gone for good, so a
// client must not retry it (as it would a 503) but submit to another log.
const ReadOnlyStatus = http.StatusGone

// refuseReadOnly answers a submission with ReadOnlyStatus and returns true
// if err says the log takes no more submissions.
func refuseReadOnly(w http.ResponseWriter, err error) bool {
	if !errors.Is(err, ctlog.ErrReadOnly) {
		return false
	}
	http.Error(w, err.Error(), ReadOnlyStatus)
	return true
}

// writeJSON writes v, indented, as a cacheable JSON document.
func writeJSON(w http.ResponseWriter, v any) {
	out, err := loglist.Marshal(v)
	if err != nil {
		http.Error(w, "encoding the document failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=60")
	w.Write(out)
}

// logJSON serves the log's log.v3.json: its entry for a CT log list, in
// the v3 schema's tiled log form (see package loglist).
func (s *Server) logJSON(l *ctlog.Log) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		e, err := l.ListEntry(time.Now())
		if err != nil {
			w.Header().Set("Retry-After", "5")
			http.Error(w, err.Error()+"; retry later", http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, e)
	}
}

// LogList returns the list of every log the process serves, as one
// operator's logs.
func (s *Server) LogList(now time.Time) (*loglist.LogList, error) {
	op := &loglist.Operator{Name: s.Operator.Name, Email: s.Operator.Email, Logs: []any{}, TiledLogs: []*loglist.TiledLog{}}
	if op.Email == nil {
		op.Email = []string{}
	}
	if op.Name == "" && len(s.logs) > 0 {
		op.Name = s.logs[0].SubmissionPrefix.Hostname()
	}
	for _, l := range s.logs {
		e, err := l.ListEntry(now)
		if err != nil {
			return nil, err
		}
		op.TiledLogs = append(op.TiledLogs, e)
	}
	return &loglist.LogList{LogListTimestamp: now.UTC().Truncate(time.Second), Operators: []*loglist.Operator{op}}, nil
}

// logList serves /logs.v3.json.
func (s *Server) logList(w http.ResponseWriter, r *http.Request) {
	ll, err := s.LogList(time.Now())
	if err != nil {
		w.Header().Set("Retry-After", "5")
		http.Error(w, err.Error()+"; retry later", http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, ll)
}

var homeTemplate = template.Must(template.New("home").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Name}} — Mosaic CT log</title>
<style>body{font-family:system-ui,sans-serif;max-width:50em;margin:2em auto;padding:0 1em}code{word-break:break-all}</style></head>
<body><h1>{{.Name}}</h1>
<p>{{.Entry.Description}}. This is a <a href="https://c2sp.org/static-ct-api">Static CT API</a> Certificate Transparency log run by Mosaic.</p>
{{if ne .State "usable"}}<p><strong>This log is {{.StateText}} since {{.Since}} and accepts no more submissions.</strong> Its tree stays readable.</p>
{{end}}<dl>
<dt>State</dt><dd>{{.StateText}}{{if .Since}} since {{.Since}}{{end}}</dd>
<dt>Submission prefix</dt><dd><code>{{.Entry.SubmissionURL}}</code></dd>
<dt>Monitoring prefix</dt><dd><code>{{.Entry.MonitoringURL}}</code></dd>
<dt>Log ID</dt><dd><code>{{.LogID}}</code></dd>
<dt>Public key (DER, base64)</dt><dd><code>{{.Key}}</code></dd>
<dt>Public key (PEM)</dt><dd><pre>{{.PEM}}</pre></dd>
<dt>Accepted NotAfter</dt><dd>{{.Start}} (inclusive) to {{.End}} (exclusive)</dd>
<dt>Maximum merge delay</dt><dd>{{.Entry.MMD}} seconds</dd>
<dt>Tree size</dt><dd>{{.TreeSize}} (checkpoint at {{.CheckpointTime}})</dd>
</dl>
{{with .Witnesses}}<h2>Witnesses</h2>
<p>Policy: {{.Policy}} cosignatures per checkpoint; the latest published checkpoint has {{.Latest}}{{if not .Quorate}} (below the policy){{end}}.</p>
<table><tr><th>Witness</th><th>State</th><th>Cosigned size</th><th>Last cosignature</th><th>Latency</th></tr>
{{range .List}}<tr><td><code>{{.Name}}</code><br><small>{{.URL}}</small></td><td>{{.State}}</td><td>{{if ge .Size 0}}{{.Size}}{{else}}unknown{{end}}</td><td>{{.LastSuccess}}</td><td>{{.Latency}}</td></tr>
{{end}}</table>{{end}}
<p><a href="log.v3.json">log.v3.json</a> · <a href="ct/v1/get-roots">get-roots</a></p>
</body></html>
`))

// stateText is how the home page names a state.
var stateText = map[ctlog.State]string{ctlog.Usable: "usable", ctlog.ReadOnly: "read-only", ctlog.Retired: "retired"}

func (s *Server) home(l *ctlog.Log) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		cp := l.Published()
		e, err := l.ListEntry(now)
		if cp == nil || err != nil {
			w.Header().Set("Retry-After", "5")
			http.Error(w, "the log's state is not known yet; retry later", http.StatusServiceUnavailable)
			return
		}
		var pem strings.Builder
		pem.WriteString("-----BEGIN PUBLIC KEY-----\n")
		b64 := base64.StdEncoding.EncodeToString(l.Keys.PublicKeyDER())
		key := b64
		for len(b64) > 64 {
			pem.WriteString(b64[:64] + "\n")
			b64 = b64[64:]
		}
		pem.WriteString(b64 + "\n-----END PUBLIC KEY-----")
		st, since := l.Status(now)
		sinceText := ""
		if !since.IsZero() {
			sinceText = since.UTC().Format(time.RFC3339)
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		homeTemplate.Execute(w, map[string]any{
			"Name":           l.Name,
			"Entry":          e,
			"State":          string(st),
			"StateText":      stateText[st],
			"Since":          sinceText,
			"LogID":          l.LogIDBase64(),
			"Key":            key,
			"PEM":            pem.String(),
			"Start":          l.NotAfterStart.UTC().Format(time.RFC3339),
			"End":            l.NotAfterLimit.UTC().Format(time.RFC3339),
			"TreeSize":       cp.Size,
			"CheckpointTime": time.UnixMilli(int64(cp.Timestamp)).UTC().Format(time.RFC3339),
			"Witnesses":      witnessesView(l), // witness.go
		})
	}
}
