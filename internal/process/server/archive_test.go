package server_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-ct/mosaic/internal/process/server"
)

// TestArchiveRefusals: mosaic archive refuses a log whose tree is not
// final (usable), and a read-only one whose serving process has not yet
// written its final-checkpoint, each with a sentence saying what to do.
func TestArchiveRefusals(t *testing.T) {
	_, c, _ := devConfig(t, "")
	logger := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	if err := server.CreateLogs(ctx, c, nil, logger); err != nil {
		t.Fatal(err)
	}
	name := c.Logs[0].Name
	_, err := server.ArchiveLog(ctx, c, name, io.Discard, logger, nil)
	if err == nil || !strings.Contains(err.Error(), "is usable: only a read-only or retired log can be archived") {
		t.Errorf("archiving a usable log: %v", err)
	}
	c.Logs[0].State = "readonly"
	c.Logs[0].StateTimestamp = time.Now().Add(-time.Minute)
	_, err = server.ArchiveLog(ctx, c, name, io.Discard, logger, nil)
	if err == nil || !strings.Contains(err.Error(), "has no final-checkpoint in its storage yet") {
		t.Errorf("archiving a read-only log not yet settled: %v", err)
	}
	if _, err := server.ArchiveLog(ctx, c, "nope", io.Discard, logger, nil); err == nil {
		t.Error("archiving a log not in the config succeeded")
	}
}
