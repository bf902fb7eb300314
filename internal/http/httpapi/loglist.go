package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/loglist"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
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
		http.Error(w, "Encoding the document failed.", http.StatusInternalServerError)
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

// stateText is how the dashboard names a state.
var stateText = map[ctlog.State]string{ctlog.Usable: "usable", ctlog.ReadOnly: "read-only", ctlog.Retired: "retired"}
