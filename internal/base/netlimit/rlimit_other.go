//go:build !linux

package netlimit

// RaiseFileLimit does nothing on systems other than Linux and reports the
// limit as unknown (zero), for which Defaults assumes a conservative one.
func RaiseFileLimit() (FileLimit, error) { return FileLimit{}, nil }
