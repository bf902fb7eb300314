package s3

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	mosaicconfig "github.com/mosaic-ct/mosaic/internal/process/config"
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
		{"access_key_id = a\n", "must have both an access_key_id line and a secret_access_key line"},
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

// snakeName matches what reads as a config or file field in a message:
// a lowercase snake_case name, possibly under a dotted path
// (storage.s3.credentials_file). Environment variables are upper case.
var snakeName = regexp.MustCompile(`\b(?:[a-z0-9]+\.)*[a-z0-9]+(?:_[a-z0-9]+)+\b`)

// fileKeys are the keys of a credentials file, not of the YAML config.
var fileKeys = map[string]bool{"access_key_id": true, "secret_access_key": true, "session_token": true}

// strictYAMLField reports whether the strict YAML config accepts the field
// at path (relative to a log; a bare name is taken as under storage.s3, as
// the server prefixes these errors with "storage.s3"), by decoding a log
// entry holding it with unknown fields refused, as config.Parse does.
func strictYAMLField(path string) error {
	if !strings.Contains(path, ".") {
		path = "storage.s3." + path
	}
	parts := strings.Split(path, ".")
	var doc strings.Builder
	for i, p := range parts {
		fmt.Fprintf(&doc, "%s%s:", strings.Repeat("  ", i), p)
		if i < len(parts)-1 {
			doc.WriteString("\n")
		}
	}
	doc.WriteString(" ~\n")
	dec := yaml.NewDecoder(strings.NewReader(doc.String()))
	dec.KnownFields(true)
	var l mosaicconfig.Log
	return dec.Decode(&l)
}

// TestCredentialErrorsNameOnlyConfigFields checks every credentials error
// an operator of the YAML config can get (the server builds the s3.Config
// from storage.s3, which has credentials_file and no key fields): each
// field it names must be one the strict YAML accepts, and a credentials
// file's own keys may be named only in an error about that file, which
// names the file. The errors only a program setting the key fields can get
// name no field at all. The old "set access_key_id and secret_access_key,
// or credentials_file" fails this.
func TestCredentialErrorsNameOnlyConfigFields(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The checker itself: it must accept real fields and refuse others.
	for _, ok := range []string{"credentials_file", "storage.s3.credentials_file", "path_style", "storage.dir"} {
		if err := strictYAMLField(ok); err != nil {
			t.Fatalf("strictYAMLField(%q) = %v, want accepted", ok, err)
		}
	}
	for _, bad := range []string{"access_key_id", "storage.s3.secret_access_key", "storage.s3.nonsense"} {
		if strictYAMLField(bad) == nil {
			t.Fatalf("strictYAMLField(%q) accepted a field config.S3 does not have", bad)
		}
	}

	type env struct{ id, secret string }
	yamlCases := []struct {
		name string
		file string
		env  env
	}{
		{"no credentials anywhere", "", env{}},
		{"only the key ID in the environment", "", env{id: "AKID"}},
		{"only the secret in the environment", "", env{secret: "s"}},
		{"absent file", filepath.Join(dir, "absent"), env{}},
		{"file others can read", write("open", "access_key_id = a\nsecret_access_key = b\n", 0o644), env{}},
		{"file without a secret", write("half", "access_key_id = a\n", 0o600), env{}},
		{"file with a profile", write("profile", "[prod]\naccess_key_id = a\n", 0o600), env{}},
		{"file with an unknown key", write("unknown", "region = x\n", 0o600), env{}},
		{"file not key = value", write("garbage", "garbage\n", 0o600), env{}},
		{"file is a directory", dir, env{}},
	}
	for _, c := range yamlCases {
		t.Setenv("AWS_ACCESS_KEY_ID", c.env.id)
		t.Setenv("AWS_SECRET_ACCESS_KEY", c.env.secret)
		t.Setenv("AWS_SESSION_TOKEN", "")
		_, err := newStoreNoProbe(Config{Endpoint: "http://127.0.0.1:9", Bucket: "b", CredentialsFile: c.file})
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		msg := err.Error()
		if c.file != "" {
			msg = strings.ReplaceAll(msg, c.file, "FILE")
		}
		for _, name := range snakeName.FindAllString(msg, -1) {
			if fileKeys[name] {
				if !strings.Contains(msg, "credentials_file FILE") {
					t.Errorf("%s: %q names the credentials file key %s as if it were a config field", c.name, err, name)
				}
				continue
			}
			if ferr := strictYAMLField(name); ferr != nil {
				t.Errorf("%s: %q names %s, which the YAML config refuses: %v", c.name, err, name, ferr)
			}
		}
	}

	// Only a program setting AccessKeyID/SecretAccessKey gets these; there
	// is no YAML field to name.
	for _, cfg := range []Config{
		{AccessKeyID: "a", SecretAccessKey: "s", CredentialsFile: "f"},
		{AccessKeyID: "a"},
		{SecretAccessKey: "s"},
	} {
		_, err := resolveCredentials(cfg)
		if err == nil {
			t.Errorf("accepted %d-byte key ID, %d-byte secret, file %q", len(cfg.AccessKeyID), len(cfg.SecretAccessKey), cfg.CredentialsFile)
			continue
		}
		if names := snakeName.FindAllString(err.Error(), -1); len(names) > 0 {
			t.Errorf("%q names %v, fields no config file has", err, names)
		}
	}
}
