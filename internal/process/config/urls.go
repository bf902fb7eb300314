package config

// The URLs a config names: submission and monitoring prefixes, the
// checkpoint origin derived from one, and a standby's advertise URL.

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ValidateAdvertise checks a standby advertise URL: http(s)://host:port with
// no path, which other processes append request paths to.
func ValidateAdvertise(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return fmt.Errorf("%q is not an http(s)://host:port URL without a path", s)
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%q names no specific host: other processes cannot reach it", s)
	}
	return nil
}

// ParsePrefix parses a submission or monitoring prefix: an http:// or
// https:// URL, with any host, port and path, normalized to end in "/".
func ParsePrefix(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("required (e.g. https://ct.example.org/2026h1/)")
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q must start with http:// or https://", s)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%q has no host", s)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("%q must not have a query, fragment or user info", s)
	}
	// The path becomes part of the HTTP routes and of the checkpoint
	// origin, so it must mean one thing: no percent-escapes (an escaped
	// "/" would silently become a path separator), no empty, "." or ".."
	// segments (clients and the router clean those away, and
	// http.ServeMux refuses such a route with a panic), no braces (route
	// wildcards to http.ServeMux).
	for _, r := range u.Path {
		if !urlPathRune(r) {
			return nil, fmt.Errorf("%q has %q in its path; use letters, digits and -._~!$&'()*+,;=:@ only", s, string(r))
		}
	}
	if strings.Contains(u.RawPath, "%") {
		return nil, fmt.Errorf("%q has a percent-escape in its path; write the characters themselves", s)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	u.RawPath = ""
	clean := path.Clean(u.Path)
	if clean != "/" {
		clean += "/"
	}
	if clean != u.Path {
		return nil, fmt.Errorf("%q has empty, \".\" or \"..\" path segments; write the path as %q", s, clean)
	}
	return u, nil
}

// urlPathRune reports whether r may appear in a prefix path: an RFC 3986
// pchar (unreserved, sub-delims, ':' and '@'), a '/', or a printable
// non-ASCII letter (an IRI path).
func urlPathRune(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return true
	case r >= utf8.RuneSelf:
		return r != utf8.RuneError && unicode.IsPrint(r) && !unicode.IsSpace(r)
	}
	return strings.ContainsRune("-._~!$&'()*+,;=:@/", r)
}

// Origin returns the checkpoint origin for a submission prefix: the URL
// without scheme and without trailing slash (static-ct-api).
func Origin(prefix *url.URL) string {
	return strings.TrimSuffix(prefix.Host+prefix.Path, "/")
}
