package s3

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/mosaic-ct/mosaic/internal/base/secretfile"
)

// credentials are the static keys the client signs requests with.
type credentials struct {
	accessKeyID     string
	secretAccessKey string
	sessionToken    string
	// source says where they came from, for error messages (never the secret).
	source string
}

// resolveCredentials picks the credentials from exactly one of the places
// Config documents, in order: the Config fields, the credentials file, the
// AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY environment variables. There is
// deliberately no fallback to instance metadata, SSO or shared profiles: an
// operator can always tell which keys Mosaic uses.
//
// Its errors are read by operators of the YAML config, whose storage.s3
// section has credentials_file but no field for the keys themselves (they
// stay out of the config file): so they name only credentials_file and the
// environment variables, and the two errors only a program that sets the
// AccessKeyID/SecretAccessKey fields can get name no config field at all.
// TestCredentialErrorsNameOnlyConfigFields holds them to that.
func resolveCredentials(cfg Config) (credentials, error) {
	explicit := cfg.AccessKeyID != "" || cfg.SecretAccessKey != ""
	switch {
	case explicit && cfg.CredentialsFile != "":
		return credentials{}, errors.New("s3: both static keys and a credentials file are given; give only one")
	case explicit:
		if cfg.AccessKeyID == "" || cfg.SecretAccessKey == "" {
			return credentials{}, errors.New("s3: static keys need both an access key ID and a secret access key")
		}
		return credentials{accessKeyID: cfg.AccessKeyID, secretAccessKey: cfg.SecretAccessKey, source: "config"}, nil
	case cfg.CredentialsFile != "":
		return readCredentialsFile(cfg.CredentialsFile)
	}
	id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if id != "" || secret != "" {
		if id == "" || secret == "" {
			return credentials{}, fmt.Errorf("s3: only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY is set in the environment; set both")
		}
		return credentials{accessKeyID: id, secretAccessKey: secret, sessionToken: os.Getenv("AWS_SESSION_TOKEN"), source: "environment"}, nil
	}
	return credentials{}, errors.New("s3: no credentials: set storage.s3.credentials_file to a credentials file, " +
		"or set the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment variables")
}

// readCredentialsFile reads and parses a credentials file. Like a log key
// file, it must not be readable or writable by group or others: whoever
// holds these credentials can rewrite or delete the log's tiles.
func readCredentialsFile(path string) (credentials, error) {
	data, err := secretfile.Read("credentials_file", path)
	if err != nil {
		return credentials{}, fmt.Errorf("s3: %w", err)
	}
	c, err := parseCredentials(data)
	if err != nil {
		return credentials{}, fmt.Errorf("s3: credentials_file %s %w", path, err)
	}
	c.source = "credentials file " + path
	return c, nil
}

// parseCredentials parses the contents of a credentials file. The format is
// "key = value" lines (spaces around "=" optional); blank lines and lines
// starting with '#' or ';' are ignored:
//
//	access_key_id = AKIA...
//	secret_access_key = ...
//	session_token = ...        (optional)
//
// The AWS spellings aws_access_key_id, aws_secret_access_key and
// aws_session_token are accepted too, and so is a single "[default]" section
// header, so an AWS shared credentials file with only the default profile
// works as is. Files with other profiles are rejected rather than guessed at,
// and so is a key set twice.
//
// Errors start with the line they are about ("line 3: ...") and never
// include a value, nor any text that might be one: a line that is not a
// known key is reported without echoing it.
func parseCredentials(data []byte) (credentials, error) {
	var c credentials
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			if line != "[default]" {
				return credentials{}, fmt.Errorf("line %d: a section other than [default]; only the default profile is supported", n)
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return credentials{}, fmt.Errorf("line %d: want \"key = value\"", n)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		original := k
		k = strings.ToLower(k)
		var field *string
		switch strings.TrimPrefix(k, "aws_") {
		case "access_key_id":
			field = &c.accessKeyID
		case "secret_access_key":
			field = &c.secretAccessKey
		case "session_token":
			field = &c.sessionToken
		default:
			if echoableKeyName(original) {
				return credentials{}, fmt.Errorf("line %d: unknown key %q (want access_key_id, secret_access_key, session_token)", n, k)
			}
			return credentials{}, fmt.Errorf("line %d: unknown key (want access_key_id, secret_access_key, session_token)", n)
		}
		name := strings.TrimPrefix(k, "aws_")
		if seen[name] {
			return credentials{}, fmt.Errorf("line %d: %s is set twice", n, name)
		}
		seen[name] = true
		// Values go into HTTP request headers and signatures: a control
		// character would fail every request with an obscure error.
		for _, r := range v {
			if r < 0x20 || r == 0x7f {
				return credentials{}, fmt.Errorf("line %d: the %s value holds a control character", n, name)
			}
		}
		*field = v
	}
	if err := sc.Err(); err != nil {
		return credentials{}, errors.New("has a line too long to be a credential")
	}
	if c.accessKeyID == "" || c.secretAccessKey == "" {
		return credentials{}, errors.New("must have both an access_key_id line and a secret_access_key line")
	}
	return c, nil
}

// echoableKeyName reports whether k, as written, looks like a key name
// (lowercase letters, digits and '_', with a '_' or an "aws" prefix, at
// most 40 bytes), which is safe to echo in an error. Anything else may be
// a mangled secret: AWS secret keys are 40 mixed-case characters.
func echoableKeyName(k string) bool {
	if k == "" || len(k) > 40 || !(strings.Contains(k, "_") || strings.HasPrefix(k, "aws")) {
		return false
	}
	for _, r := range k {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}
