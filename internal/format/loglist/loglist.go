// Package loglist is the CT log list v3 schema
// (https://www.gstatic.com/ct/log_list/v3/log_list_schema.json) for what
// Mosaic publishes about its logs: each log's log.v3.json (a tiled log
// entry) and a process's /logs.v3.json (a list with one operator), with
// the fields of the "Operator-published CT Log Metadata" proposal
// (github.com/mcpherrinm/ctmeta's log-metadata-v1 schema) next to the v3
// fields of each log, as Sunlight v0.9.0 publishes them, so one document
// serves log lists and the metadata Chrome asks operators to host; and
// the operator document, /logs.json (ctmeta's operator-list-v1: the
// operator's name and the URL of each log's metadata).
//
// The v3 types mirror certificate-transparency-go's loglist3, field for
// field and with the same JSON names; they are declared here rather than
// imported because loglist3 carries a log filter that links the klog
// logging library into whatever imports it. The tests check Mosaic's
// documents against JSON schemas of both (package loglisttest).
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

	Metadata
}

// Metadata is a log's fields from the "Operator-published CT Log
// Metadata" proposal. Log lists that know only v3 ignore them. (The
// proposal's log_id, key and temporal_interval are the v3 fields of the
// same names.)
type Metadata struct {
	// FriendlyName is a short human-readable name for the log (its
	// name in Mosaic's config unless configured).
	FriendlyName string `json:"friendly_name"`
	// LogSpec is the API the log implements: always "static-ct-api".
	LogSpec string `json:"log_spec"`
	// MMDSeconds is the maximum merge delay in seconds (as MMD).
	MMDSeconds int32 `json:"mmd_seconds"`
	// TLSOnly says the log accepts only certificates usable for TLS
	// servers; absent otherwise.
	TLSOnly bool `json:"tls_only,omitempty"`
	// IntendedUse is "production", "test" or "decommissioned".
	IntendedUse string `json:"intended_use"`
	// Status is "active", "readonly" or "inactive" (Mosaic's usable,
	// readonly and retired).
	Status string `json:"status"`
	// StatusTimestamp is when the status began (RFC 3339).
	StatusTimestamp string `json:"status_timestamp"`
	// PlannedChanges are the status changes already scheduled.
	PlannedChanges []PlannedChange `json:"planned_changes,omitempty"`
	// FinalTreeHead is a log's last tree, once it is not active.
	FinalTreeHead      *FinalTreeHead `json:"final_tree_head,omitempty"`
	SubmissionEndpoint Endpoint       `json:"submission_endpoint"`
	MonitoringEndpoint Endpoint       `json:"monitoring_endpoint"`
	LogSoftware        Software       `json:"log_software"`
}

// The proposal's statuses.
const (
	StatusActive   = "active"
	StatusReadOnly = "readonly"
	StatusInactive = "inactive"
)

// PlannedChange is a status the log will enter at EffectiveDate (RFC
// 3339).
type PlannedChange struct {
	NewStatus     string `json:"new_status"`
	EffectiveDate string `json:"effective_date"`
	Comment       string `json:"comment,omitempty"`
}

// FinalTreeHead is the tree a log stopped at, with its checkpoint's
// timestamp (milliseconds since the epoch).
type FinalTreeHead struct {
	SHA256RootHash []byte `json:"sha256_root_hash"`
	TreeSize       int64  `json:"tree_size"`
	Timestamp      int64  `json:"timestamp"`
}

// Endpoint is where an API is served.
type Endpoint struct {
	URL string `json:"url"`
	// RateLimit is the requests one client may make (absent: no limit).
	RateLimit *RateLimit `json:"rate_limit,omitempty"`
}

// RateLimit is an endpoint's per-client request limit: Requests per
// IntervalSeconds.
type RateLimit struct {
	Requests        int64 `json:"requests"`
	IntervalSeconds int64 `json:"interval_seconds"`
}

// Software names the program running the log.
type Software struct {
	Name    string `json:"name"`
	Version string `json:"version"`
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

// OperatorList is the operator document (/logs.json): who runs the logs
// and where each log's metadata (its log.v3.json) is.
type OperatorList struct {
	OperatorName string   `json:"operator_name"`
	Logs         []string `json:"logs"`
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
