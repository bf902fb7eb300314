// Package loglist is the CT log list v3 schema
// (https://www.gstatic.com/ct/log_list/v3/log_list_schema.json) for what
// Mosaic publishes about its logs: each log's log.v3.json (a tiled log
// entry) and a process's /logs.v3.json (a list with one operator).
//
// The types mirror certificate-transparency-go's loglist3, field for field
// and with the same JSON names, and the tests decode Mosaic's documents
// strictly (unknown fields refused) into loglist3's types. They are
// declared here rather than imported because loglist3 carries a log
// filter that links the klog logging library into whatever imports it.
package loglist

import (
	"encoding/json"
	"time"
)

// LogList is a list of logs grouped by operator.
type LogList struct {
	Version          string      `json:"version,omitempty"`
	LogListTimestamp time.Time   `json:"log_list_timestamp"`
	Operators        []*Operator `json:"operators"`
}

// Operator runs logs. Logs (RFC 6962 logs with a single URL) is always
// empty for Mosaic, but the schema requires it.
type Operator struct {
	Name      string      `json:"name"`
	Email     []string    `json:"email"`
	Logs      []any       `json:"logs"`
	TiledLogs []*TiledLog `json:"tiled_logs"`
}

// TiledLog is a Static CT API log's entry.
type TiledLog struct {
	Description   string `json:"description,omitempty"`
	LogID         []byte `json:"log_id"`
	Key           []byte `json:"key"`
	SubmissionURL string `json:"submission_url"`
	MonitoringURL string `json:"monitoring_url"`
	// MMD is the maximum merge delay in seconds.
	MMD              int32             `json:"mmd"`
	State            *LogStates        `json:"state,omitempty"`
	TemporalInterval *TemporalInterval `json:"temporal_interval,omitempty"`
}

// TemporalInterval is the NotAfter range the log accepts.
type TemporalInterval struct {
	StartInclusive time.Time `json:"start_inclusive"`
	EndExclusive   time.Time `json:"end_exclusive"`
}

// LogStates holds exactly one state: the log's current one.
type LogStates struct {
	Usable   *LogState         `json:"usable,omitempty"`
	ReadOnly *ReadOnlyLogState `json:"readonly,omitempty"`
	Retired  *LogState         `json:"retired,omitempty"`
}

// LogState says when the state began.
type LogState struct {
	Timestamp time.Time `json:"timestamp"`
}

// ReadOnlyLogState is a read-only log's state, with the tree head it
// stopped at.
type ReadOnlyLogState struct {
	LogState
	FinalTreeHead TreeHead `json:"final_tree_head"`
}

// TreeHead is a tree's size and root hash.
type TreeHead struct {
	SHA256RootHash []byte `json:"sha256_root_hash"`
	TreeSize       int64  `json:"tree_size"`
}

// Marshal encodes a document as Mosaic serves and stores it: indented
// JSON ending in a newline.
func Marshal(v any) ([]byte, error) {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
