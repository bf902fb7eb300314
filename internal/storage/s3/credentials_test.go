package s3

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCredentialsFileMode checks that a credentials_file other users can
// read or write is refused, like a log key file, with an error naming the
// file, its mode and the chmod that fixes it, and never its contents.
func TestCredentialsFileMode(t *testing.T) {
	const content = "access_key_id = AKIDEXAMPLE\nsecret_access_key = wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY\n"
	for _, mode := range []os.FileMode{0o600, 0o400, 0o640, 0o604, 0o644, 0o660, 0o620, 0o602} {
		t.Run(fmt.Sprintf("%04o", mode), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "s3.creds")
			if err := os.WriteFile(p, []byte(content), mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, mode); err != nil {
				t.Fatal(err)
			}
			c, err := resolveCredentials(Config{CredentialsFile: p})
			if mode&0o077 == 0 {
				if err != nil || c.accessKeyID != "AKIDEXAMPLE" || c.secretAccessKey != "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY" {
					t.Fatalf("mode %04o: %+v, %v", mode, c, err)
				}
				return
			}
			want := fmt.Sprintf("s3: credentials_file %s is readable or writable by other users (mode %04o); run: chmod 600 %s", p, mode, p)
			if err == nil || err.Error() != want {
				t.Fatalf("err = %v, want %q", err, want)
			}
			if strings.Contains(err.Error(), "wJalr") || strings.Contains(err.Error(), "AKID") {
				t.Error("the refusal shows the credentials")
			}
		})
	}
}

func TestParseCredentials(t *testing.T) {
	good := []struct {
		in                  string
		id, secret, session string
	}{
		{"access_key_id = a\nsecret_access_key = b\n", "a", "b", ""},
		{"# comment\n; other\n\n[default]\naws_access_key_id=a\naws_secret_access_key = b=c\naws_session_token = t\n", "a", "b=c", "t"},
		{"ACCESS_KEY_ID = a\r\nSECRET_ACCESS_KEY = b\r\n", "a", "b", ""},
	}
	for _, tt := range good {
		c, err := parseCredentials([]byte(tt.in))
		if err != nil || c.accessKeyID != tt.id || c.secretAccessKey != tt.secret || c.sessionToken != tt.session {
			t.Errorf("parseCredentials(%q) = %+v, %v", tt.in, c, err)
		}
	}
	const secret = "wJalrXUtnFEMIK7MDENG"
	bad := []struct{ in, want string }{
		{"access_key_id = a\n", "must set both"},
		{"[prod]\naccess_key_id = a\nsecret_access_key = b\n", "line 1: a section other than [default]"},
		{"access_key_id a\nsecret_access_key = b\n", `line 1: want "key = value"`},
		{"access_key = a\nsecret_access_key = b\n", `line 1: unknown key "access_key"`},
		{"access_key_id = a\nsecret_access_key = b\nsecret_access_key = c\n", "line 3: secret_access_key is set twice"},
		{"access_key_id = a\naws_access_key_id = c\nsecret_access_key = b\n", "line 2: access_key_id is set twice"},
		{"access_key_id = a\nsecret_access_key = b\x00c\n", "line 2: the secret_access_key value holds a control character"},
		// A secret mangled into a key position is not echoed.
		{"secret_access_key " + secret + "=x\naccess_key_id = a\n", "line 1: unknown key (want"},
		{"[" + secret + "]\n", "line 1: a section other than [default]"},
		{strings.ToLower(secret) + "=x\naccess_key_id = a\n", "line 1: unknown key (want"},
		{"region = us-east-1\naccess_key_id = a\n", "line 1: unknown key (want"},
		{"aws_region = us-east-1\naccess_key_id = a\n", `line 1: unknown key "aws_region"`},
	}
	for _, tt := range bad {
		_, err := parseCredentials([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseCredentials(%q): err = %v, want %q", tt.in, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("parseCredentials(%q): error shows the secret: %v", tt.in, err)
		}
	}
}
