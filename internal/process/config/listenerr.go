package config

import (
	"errors"
	"fmt"
	"syscall"
)

// ListenError describes a failure to listen on addr. An address already in
// use (the most common one: a second copy of Mosaic, or another server on
// the port) gets what to do about it, hint, instead of Go's "bind: address
// already in use" alone.
func ListenError(addr string, err error, hint string) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s is already in use by another process (is Mosaic already running?); %s", addr, hint)
	}
	if errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("not allowed to listen on %s (ports below 1024 need privileges); %s", addr, hint)
	}
	return fmt.Errorf("listening on %s: %w", addr, err)
}
