package s3

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
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
func resolveCredentials(cfg Config) (credentials, error) {
	explicit := cfg.AccessKeyID != "" || cfg.SecretAccessKey != ""
	switch {
	case explicit && cfg.CredentialsFile != "":
		return credentials{}, fmt.Errorf("s3: both access_key_id/secret_access_key and credentials_file are set; set only one")
	case explicit:
		if cfg.AccessKeyID == "" || cfg.SecretAccessKey == "" {
			return credentials{}, fmt.Errorf("s3: access_key_id and secret_access_key must be set together")
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
	return credentials{}, fmt.Errorf("s3: no credentials: set access_key_id and secret_access_key, or credentials_file, " +
		"or the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment variables")
}

// readCredentialsFile parses a credentials file. The format is "key = value"
// lines (spaces around "=" optional); blank lines and lines starting with '#'
// or ';' are ignored:
//
//	access_key_id = AKIA...
//	secret_access_key = ...
//	session_token = ...        (optional)
//
// The AWS spellings aws_access_key_id, aws_secret_access_key and
// aws_session_token are accepted too, and so is a single "[default]" section
// header, so an AWS shared credentials file with only the default profile
// works as is. Files with other profiles are rejected rather than guessed at.
func readCredentialsFile(path string) (credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return credentials{}, fmt.Errorf("s3: reading credentials_file: %w", err)
	}
	c := credentials{source: "credentials file " + path}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			if line != "[default]" {
				return credentials{}, fmt.Errorf("s3: credentials_file %s line %d: section %s: only [default] is supported", path, n, line)
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return credentials{}, fmt.Errorf("s3: credentials_file %s line %d: want \"key = value\"", path, n)
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		switch strings.TrimPrefix(k, "aws_") {
		case "access_key_id":
			c.accessKeyID = v
		case "secret_access_key":
			c.secretAccessKey = v
		case "session_token":
			c.sessionToken = v
		default:
			return credentials{}, fmt.Errorf("s3: credentials_file %s line %d: unknown key %q (want access_key_id, secret_access_key, session_token)", path, n, k)
		}
	}
	if err := sc.Err(); err != nil {
		return credentials{}, fmt.Errorf("s3: reading credentials_file %s: %w", path, err)
	}
	if c.accessKeyID == "" || c.secretAccessKey == "" {
		return credentials{}, fmt.Errorf("s3: credentials_file %s must set both access_key_id and secret_access_key", path)
	}
	return c, nil
}
