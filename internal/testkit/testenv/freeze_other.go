//go:build !unix

package testenv

import "os"

// freezeSignals: there is no SIGSTOP here, so OwnMinIO cannot freeze.
func freezeSignals() (stop, cont os.Signal, ok bool) { return nil, nil, false }
