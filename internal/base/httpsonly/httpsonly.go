// Package httpsonly is the redirect policy of clients that fetch what a
// Mosaic process trusts over https: the roots (the CCADB report, package
// roots) and a witness's log lists (package witnessd).
package httpsonly

import (
	"errors"
	"fmt"
	"net"
	"net/http"
)

// MaxRedirects is how many redirects a request follows at most.
const MaxRedirects = 5

// CheckRedirect returns an http.Client.CheckRedirect that follows a
// redirect only to https, or to a loopback host (a local mirror or a test
// server), and at most MaxRedirects times; what names what is fetched, for
// the error. The config insists on an https:// URL (fetched in the clear,
// what is trusted could be altered by anyone on the path), and Go's client
// would otherwise follow a redirect from https to plain http.
func CheckRedirect(what string) func(req *http.Request, via []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= MaxRedirects {
			return errors.New("too many redirects")
		}
		if req.URL.Scheme == "https" || isLoopback(req.URL.Hostname()) {
			return nil
		}
		return fmt.Errorf("refusing a redirect to %s: %s are fetched over https only", req.URL.Redacted(), what)
	}
}

// Client returns a copy of c (http.DefaultClient if nil) whose redirects
// follow CheckRedirect(what).
func Client(c *http.Client, what string) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	cc := *c
	cc.CheckRedirect = CheckRedirect(what)
	return &cc
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
