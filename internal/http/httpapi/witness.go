package httpapi

import (
	"fmt"
	"time"

	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
)

// witnessView is one witness's line on the home page.
type witnessView struct {
	Name, URL, State, LastSuccess, Latency string
	Size                                   int64
}

// witnessesView describes a log's witnesses for the home page (nil if it
// has none).
func witnessesView(l *ctlog.Log) map[string]any {
	if l.Witnesses == nil {
		return nil
	}
	quorum, latest, n := l.Witnesses.Policy()
	var ws []witnessView
	for _, s := range l.Witnesses.Statuses() {
		v := witnessView{Name: s.Name, URL: s.URL, Size: s.Size, LastSuccess: "never", Latency: "—"}
		switch {
		case s.LastAttempt.IsZero():
			v.State = "not contacted yet"
		case s.LastError == "":
			v.State = "ok"
		default:
			v.State = "failing: " + s.LastError
		}
		if !s.LastSuccess.IsZero() {
			v.LastSuccess = s.LastSuccess.UTC().Format(time.RFC3339)
		}
		if !s.LastAttempt.IsZero() {
			v.Latency = s.Latency.Round(time.Millisecond).String()
		}
		ws = append(ws, v)
	}
	return map[string]any{
		"Policy":  fmt.Sprintf("%d of %d", quorum, n),
		"Latest":  latest,
		"List":    ws,
		"Quorate": latest >= quorum,
	}
}
