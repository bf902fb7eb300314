package secretfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func write(t *testing.T, name string, data []byte, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // not subject to the umask
		t.Fatal(err)
	}
	return p
}

func TestReadModes(t *testing.T) {
	for _, tt := range []struct {
		mode os.FileMode
		ok   bool
	}{
		{0o600, true}, {0o400, true}, {0o700, true}, {0o200, true},
		{0o640, false}, {0o604, false}, {0o644, false}, {0o660, false}, {0o666, false},
		{0o620, false}, {0o602, false}, {0o610, false}, {0o601, false}, {0o777, false},
	} {
		t.Run(fmt.Sprintf("%04o", tt.mode), func(t *testing.T) {
			p := write(t, "secret", []byte("s3cr3t-value"), tt.mode)
			data, err := Read("test secret", p)
			if tt.ok {
				if tt.mode&0o400 == 0 {
					return // unreadable by the owner: an open error is right
				}
				if err != nil || string(data) != "s3cr3t-value" {
					t.Fatalf("Read = %q, %v", data, err)
				}
				return
			}
			if err == nil {
				t.Fatal("Read accepted the file")
			}
			msg := err.Error()
			want := fmt.Sprintf("test secret %s is readable or writable by other users (mode %04o); run: chmod 600 %s", p, tt.mode, p)
			if msg != want {
				t.Errorf("error %q, want %q", msg, want)
			}
			if !errors.Is(err, ErrTooOpen) {
				t.Error("error does not wrap ErrTooOpen")
			}
			if strings.Contains(msg, "s3cr3t") {
				t.Error("error includes the file's contents")
			}
		})
	}
}

func TestReadRefuses(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read("test secret", filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "test secret") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Read("test secret", dir); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("directory: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Refused without opening it (which would block).
	if _, err := Read("test secret", fifo); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("FIFO: %v", err)
	}
	big := write(t, "big", make([]byte, MaxSize+1), 0o600)
	if _, err := Read("test secret", big); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("large file: %v", err)
	}
	// A symlink is followed: the target's mode is what matters.
	target := write(t, "target", []byte("x"), 0o644)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Read("test secret", link); !errors.Is(err, ErrTooOpen) {
		t.Errorf("symlink to a 0644 file: %v", err)
	}
}
