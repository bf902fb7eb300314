// Package secretfile reads the files that hold a Mosaic process's secrets:
// log keys (package keys) and S3 credentials (package storage/s3). It
// refuses a file that users other than its owner can read or write, since
// a leaked log key lets anyone sign SCTs and tree heads in the log's name,
// and leaked storage credentials let anyone rewrite or delete the log's
// tiles. Both packages share this one check so that they refuse the same
// files with the same words.
package secretfile

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxSize bounds a secret file. Key and credential files are a few hundred
// bytes; anything much larger is the wrong file.
const MaxSize = 64 << 10

// Read returns the contents of the secret file at path. what names the file
// in errors ("key file", "s3 credentials_file"). It refuses a file that is
// not a regular file, that group or others may read or write (saying which
// chmod fixes it), or that is larger than MaxSize. Errors never include the
// file's contents.
//
// The mode is checked on the opened file, so a file replaced between the
// check and the read cannot slip through; the path is checked first, so
// that a FIFO or device is refused without opening it (opening a FIFO
// blocks).
func Read(what, path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := check(what, path, info); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := check(what, path, opened); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%s %s is larger than %d bytes, too large to be a %s", what, path, MaxSize, what)
	}
	return data, nil
}

// ErrTooOpen is wrapped by the error Read returns for a file that users
// other than its owner may read or write.
var ErrTooOpen = errors.New("the file is accessible to other users")

func check(what, path string, info os.FileInfo) error {
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s %s is not a regular file", what, path)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return &tooOpenError{what: what, path: path, perm: perm}
	}
	return nil
}

// tooOpenError is the refusal of a file with group or other permissions.
type tooOpenError struct {
	what, path string
	perm       os.FileMode
}

func (e *tooOpenError) Error() string {
	return fmt.Sprintf("%s %s is readable or writable by other users (mode %04o); run: chmod 600 %s", e.what, e.path, e.perm, e.path)
}

func (e *tooOpenError) Unwrap() error { return ErrTooOpen }
