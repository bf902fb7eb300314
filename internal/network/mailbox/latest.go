// Package mailbox is the one-slot mailbox between the sequencer and its
// followers (the witness publisher, the mirror pusher): a round hands over
// its checkpoint without ever waiting, and the follower takes the newest.
package mailbox

import "sync"

// Latest is the mailbox of a sequencer.Publisher: Publish keeps only the newest
// checkpoint handed over (never blocking the round), and Run waits on
// Wake and takes it. Checkpoints that arrive while Run is busy are
// coalesced: it sees the newest.
type Latest struct {
	mu     sync.Mutex
	signed []byte
	wake   chan struct{}
}

// NewLatest returns an empty mailbox.
func NewLatest() *Latest { return &Latest{wake: make(chan struct{}, 1)} }

// Publish records signed, replacing any checkpoint not yet taken.
func (l *Latest) Publish(signed []byte) {
	l.mu.Lock()
	l.signed = signed
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Wake is signalled after Publish.
func (l *Latest) Wake() <-chan struct{} { return l.wake }

// Take returns the checkpoint not yet taken (nil if none) and empties the
// mailbox.
func (l *Latest) Take() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.signed
	l.signed = nil
	return s
}
