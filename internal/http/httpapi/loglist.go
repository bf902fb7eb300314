package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/mosaic-ct/mosaic/internal/format/loglist"
	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
)

// Operator is who runs a process's logs, for /logs.json and
// /logs.v3.json.
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

// operatorName is the operator's configured name, or else the host of the
// first log's submission prefix.
func (s *Server) operatorName() string {
	if s.Operator.Name == "" && len(s.logs) > 0 {
		return s.logs[0].SubmissionPrefix.Hostname()
	}
	return s.Operator.Name
}

// OperatorList returns the operator document (/logs.json, ctmeta's
// operator-list-v1): the operator's name and the URL of each log's
// metadata, its log.v3.json under its monitoring prefix (which the log's
// storage holds too, so it is there wherever the read path is served
// from), in the order of the config.
func (s *Server) OperatorList() *loglist.OperatorList {
	ol := &loglist.OperatorList{OperatorName: s.operatorName(), Logs: make([]string, 0, len(s.logs))}
	for _, l := range s.logs {
		ol.Logs = append(ol.Logs, l.MonitoringPrefix.JoinPath("log.v3.json").String())
	}
	return ol
}

// operatorList serves /logs.json. It does not change while the process
// runs.
func (s *Server) operatorList(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, s.OperatorList())
}

// LogList returns the list of every log the process serves, as one
// operator's logs.
func (s *Server) LogList(now time.Time) (*loglist.LogList, error) {
	op := &loglist.Operator{Name: s.operatorName(), Email: s.Operator.Email, Logs: []any{}, TiledLogs: []*loglist.TiledLog{}}
	if op.Email == nil {
		op.Email = []string{}
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
