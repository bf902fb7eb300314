package httpapi

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"time"
)

// How fresh the read path's checkpoint is (checkpointCache):
//   - checkpointMaxAge: the stored checkpoint is re-read at least this
//     often, so a checkpoint written by another process (the leader, for a
//     standby) or cosigned by witnesses is served within about a second;
//   - checkpointMinRefresh: when this process has published a tree larger
//     than the one held, the checkpoint is re-read at most this often
//     until storage has it (the sequencer publishes in memory just before
//     it writes the checkpoint to storage).
const (
	checkpointMaxAge     = time.Second
	checkpointMinRefresh = 50 * time.Millisecond
)

// checkpointCache holds the stored checkpoint of a log in memory, so that
// the read path's most frequent request costs no storage read (a file
// open and read on local disk, a GET on S3): at most one read per
// checkpointMinRefresh while the log grows, one per checkpointMaxAge
// while it idles, whatever the request rate.
//
// It serves exactly the bytes storage held when they were read, never
// bytes of its own: the bytes are signed, so at worst a client gets a
// valid checkpoint up to checkpointMaxAge older than storage's, which
// it must accept from any cache or CDN anyway (tlog-tiles clients check
// consistency between the checkpoints they see). It never serves a
// smaller tree than it has served: a re-read that finds one (an eventually
// consistent storage) keeps the held checkpoint.
type checkpointCache struct {
	// published returns the size of the latest tree this process has
	// committed or learned of (-1 if none).
	published func() int64

	mu         sync.Mutex
	data       []byte
	length     []string // Content-Length of data
	size       int64    // the tree size data names, or -1
	at         time.Time
	refreshing bool
	now        func() time.Time
}

func newCheckpointCache(published func() int64) *checkpointCache {
	return &checkpointCache{published: published, now: time.Now}
}

// get returns the checkpoint and its Content-Length, from memory or read
// with load. While one request re-reads it, the others are served the held
// checkpoint; load errors are returned (nothing held is served in place of
// an error once it is older than checkpointMaxAge, so a storage that fails
// is seen as failing).
func (c *checkpointCache) get(ctx context.Context, load func(context.Context, string) ([]byte, error)) ([]byte, []string, error) {
	c.mu.Lock()
	if c.data != nil {
		age := c.now().Sub(c.at)
		fresh := age < checkpointMaxAge && (age < checkpointMinRefresh || c.size >= c.published())
		if fresh || c.refreshing && age < checkpointMaxAge {
			data, length := c.data, c.length
			c.mu.Unlock()
			return data, length, nil
		}
	}
	c.refreshing = true
	c.mu.Unlock()

	data, err := load(ctx, "checkpoint")

	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshing = false
	if err != nil {
		return nil, nil, err
	}
	size := checkpointSize(data)
	if c.data == nil || size >= c.size {
		c.data, c.length, c.size = data, []string{strconv.Itoa(len(data))}, size
	}
	c.at = c.now()
	return c.data, c.length, nil
}

// checkpointSize is the tree size on a checkpoint's second line, or -1 if
// it has none.
func checkpointSize(note []byte) int64 {
	_, rest, ok := bytes.Cut(note, []byte("\n"))
	line, _, ok2 := bytes.Cut(rest, []byte("\n"))
	if !ok || !ok2 {
		return -1
	}
	n, err := strconv.ParseInt(string(line), 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}
