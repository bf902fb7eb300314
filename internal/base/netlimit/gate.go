package netlimit

// Gate bounds how many requests of one kind do work at once that takes a
// scarce shared resource, a database connection: the public lookups
// (get-proof-by-hash, a witness's monitoring checkpoint) that must not
// queue for the connections the leader lease, the clock check and the
// sequencer need. A request takes a slot or is refused at once, never
// queued: a flood of lookups then costs the flooders 503s and the
// database at most the Gate's size in connections, however many
// connections they hold (package server sizes it from the pool).
//
// A nil Gate admits everything (a backend with no scarce connection, the
// embedded database).
type Gate struct {
	slots chan struct{}
}

// NewGate returns a Gate of n slots (at least 1).
func NewGate(n int) *Gate {
	return &Gate{slots: make(chan struct{}, max(1, n))}
}

// GateRetryAfter is the Retry-After, in seconds, of a request a Gate
// refused: a lookup takes milliseconds, so a slot is soon free again.
const GateRetryAfter = 1

// Enter takes a slot if one is free, or returns ok false at once. Every
// successful Enter must be followed by one call of release.
func (g *Gate) Enter() (release func(), ok bool) {
	if g == nil {
		return func() {}, true
	}
	select {
	case g.slots <- struct{}{}:
		return func() { <-g.slots }, true
	default:
		return nil, false
	}
}

// Size returns the number of slots (0 for a nil Gate: unbounded).
func (g *Gate) Size() int {
	if g == nil {
		return 0
	}
	return cap(g.slots)
}
