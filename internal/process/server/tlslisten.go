package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"

	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/staticct"
)

// certPollInterval is how often a TLS listener's certificate files are
// read to see whether they changed (see CertReloader.Watch). Reading two
// small files costs next to nothing, and comparing contents (not mtimes)
// catches every replacement, renames and symlink swaps included.
const certPollInterval = 2 * time.Second

// ACME retry schedule of the background request for a domain's first
// certificate (acmeSource.run): quick enough to recover from a brief CA
// outage, slow enough to stay far below CAs' failed-validation limits
// (Let's Encrypt allows 5 failures per account, host name and hour).
const (
	acmeRetryFirst = time.Minute
	acmeRetryMax   = time.Hour
)

// listenerTLS is where a TLS listener's certificates come from: a
// certificate and key file pair (files) or an ACME CA (acme).
type listenerTLS struct {
	index int
	files *CertReloader
	acme  *acmeSource
	http2 bool
}

// newListenerTLS sets up listener i's certificate source; it returns nil
// for a plain-HTTP listener.
func newListenerTLS(i int, l *config.Listener) (*listenerTLS, error) {
	lt := &listenerTLS{index: i, http2: l.HTTP2}
	switch {
	case l.TLSCert != "":
		cr, err := NewCertReloader(l.TLSCert, l.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("listen[%d]: %w", i, err)
		}
		lt.files = cr
	case l.ACME != nil:
		a, err := newACMESource(l.ACME)
		if err != nil {
			return nil, fmt.Errorf("listen[%d].acme: %w", i, err)
		}
		lt.acme = a
	default:
		return nil, nil
	}
	return lt, nil
}

// tlsMetrics count completed TLS handshakes; a reconnect storm shows as a
// burst of full (not resumed) handshakes.
type tlsMetrics struct {
	handshakes *prometheus.CounterVec
}

func newTLSMetrics(reg prometheus.Registerer) (*tlsMetrics, error) {
	m := &tlsMetrics{handshakes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mosaic_tls_handshakes_total",
		Help: "TLS handshakes completed on the TLS listeners, by listener index and whether the client resumed a session (resumed handshakes skip the certificate signature and cost a fraction of a full one).",
	}, []string{"listen", "resumed"})}
	if err := reg.Register(m.handshakes); err != nil {
		return nil, err
	}
	return m, nil
}

// config returns the listener's tls.Config and configures srv for it.
func (lt *listenerTLS) config(srv *http.Server, m *tlsMetrics) *tls.Config {
	full := m.handshakes.WithLabelValues(strconv.Itoa(lt.index), "false")
	resumed := m.handshakes.WithLabelValues(strconv.Itoa(lt.index), "true")
	c := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Called once per completed handshake, full or resumed (the
		// server requests no client certificate, so it checks nothing).
		VerifyConnection: func(cs tls.ConnectionState) error {
			if cs.DidResume {
				resumed.Inc()
			} else {
				full.Inc()
			}
			return nil
		},
	}
	// HTTP/1.1 unless the listener offers HTTP/2 (config.Listener.HTTP2
	// says why).
	protos := []string{"http/1.1"}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	if lt.http2 {
		protos = []string{"h2", "http/1.1"}
		srv.Protocols.SetHTTP2(true)
	}
	if lt.files != nil {
		c.GetCertificate = lt.files.GetCertificate
	} else {
		c.GetCertificate = lt.acme.GetCertificate
		// The TLS-ALPN-01 challenge is answered on this listener.
		protos = append(protos, acme.ALPNProto)
	}
	c.NextProtos = protos
	return c
}

// acmeSource gets and renews a listener's certificates from an ACME CA
// with autocert, proving control of each domain by TLS-ALPN-01 on the
// listener itself.
//
// Only the background loop (run) asks the CA for a domain's first
// certificate, on a retry schedule: autocert alone would ask on every
// handshake for a name it has no certificate for, so a client (or an
// attacker) connecting in a loop while the CA fails would run the
// account into the CA's rate limits. Once a domain has a certificate
// (from the CA or from the cache directory), handshakes go to autocert,
// which serves it from memory and renews it in the background 30 days
// before it expires. Names outside the configured domains are refused by
// autocert's host policy without contacting the CA.
type acmeSource struct {
	m       *autocert.Manager
	domains []string

	mu    sync.Mutex
	ready map[string]bool // domains (lower case) with a certificate
}

func newACMESource(a *config.ACME) (*acmeSource, error) {
	if err := privateDir(a.CacheDir); err != nil {
		return nil, fmt.Errorf("cache_dir: %w", err)
	}
	hc := &http.Client{Timeout: time.Minute}
	if a.CARoots != "" {
		b, err := os.ReadFile(a.CARoots)
		if err != nil {
			return nil, fmt.Errorf("ca_roots: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("ca_roots: %s holds no PEM certificate", a.CARoots)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		hc.Transport = tr
	}
	domains := make([]string, len(a.Domains))
	for i, d := range a.Domains {
		domains[i] = strings.ToLower(d)
	}
	s := &acmeSource{
		domains: domains,
		ready:   map[string]bool{},
		m: &autocert.Manager{
			// The operator accepted the terms (config.ACME.AcceptTOS is
			// required).
			Prompt:     autocert.AcceptTOS,
			Cache:      autocert.DirCache(a.CacheDir),
			HostPolicy: autocert.HostWhitelist(domains...),
			Email:      a.Email,
			Client: &acme.Client{
				DirectoryURL: a.DirectoryURL,
				HTTPClient:   hc,
				UserAgent:    staticct.UserAgent("mosaic"),
			},
		},
	}
	return s, nil
}

// privateDir creates dir with mode 0700 if it is missing, and refuses it
// if other users can read, write or enter it: it holds the ACME account
// key and the certificates' private keys.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s has mode %04o, so other users can reach the private keys it holds; chmod 700 %s", dir, perm, dir)
	}
	return nil
}

// errNoCertYet answers handshakes for a domain whose first certificate is
// still being requested.
var errNoCertYet = errors.New("acme: no certificate for this name yet; it is being requested from the CA")

// GetCertificate is for tls.Config.GetCertificate.
func (s *acmeSource) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.TrimSuffix(strings.ToLower(hello.ServerName), ".")
	// TLS-ALPN-01 validation connections from the CA always go to
	// autocert, which answers them with the challenge certificate.
	for _, p := range hello.SupportedProtos {
		if p == acme.ALPNProto {
			return s.m.GetCertificate(hello)
		}
	}
	s.mu.Lock()
	ready := s.ready[name]
	s.mu.Unlock()
	if !ready {
		return nil, errNoCertYet
	}
	return s.m.GetCertificate(hello)
}

// ecdsaHello is a ClientHello from a client that supports ECDSA P-256, so
// that autocert gets (or loads) an ECDSA certificate: its handshakes cost
// a fraction of an RSA certificate's.
func ecdsaHello(name string) *tls.ClientHelloInfo {
	return &tls.ClientHelloInfo{
		ServerName:        name,
		SignatureSchemes:  []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256},
		SupportedCurves:   []tls.CurveID{tls.X25519, tls.CurveP256},
		CipherSuites:      []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
		SupportedVersions: []uint16{tls.VersionTLS13, tls.VersionTLS12},
	}
}

// run gets each domain's certificate (from the cache directory, or else
// from the CA), retrying failures with backoff, until every domain has one
// or ctx is done. It logs each outcome.
func (s *acmeSource) run(ctx context.Context, index int, logger *slog.Logger) {
	var wg sync.WaitGroup
	for _, d := range s.domains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait := acmeRetryFirst
			for {
				start := time.Now()
				c, err := s.m.GetCertificate(ecdsaHello(d))
				if err == nil {
					s.mu.Lock()
					s.ready[d] = true
					s.mu.Unlock()
					logger.Info("acme: certificate ready", "listen", index, "domain", d,
						"not_after", c.Leaf.NotAfter, "issuer", c.Leaf.Issuer.String(), "took", time.Since(start).Round(time.Millisecond))
					return
				}
				logger.Error("acme: could not get a certificate; handshakes for this name fail until it is obtained",
					"listen", index, "domain", d, "err", err, "retry_in", wait)
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
				wait = min(2*wait, acmeRetryMax)
			}
		}()
	}
	wg.Wait()
}

// watchFiles reloads the listener's certificate files when they change,
// until ctx is done.
func (s *Server) watchFiles(ctx context.Context, lt *listenerTLS) {
	lt.files.Watch(ctx, certPollInterval, func(changed bool, err error) {
		s.logCertReload(lt.index, "the files changed", changed, err)
	})
}

// logCertReload logs the outcome of reloading listener i's certificate
// files.
func (s *Server) logCertReload(i int, trigger string, changed bool, err error) {
	cr := s.tls[i].files
	cur := cr.Current()
	addr := s.cfg.Listen[i].Address
	switch {
	case err != nil:
		s.logger.Error("reload: TLS certificate not reloaded; still serving the previous one", "trigger", trigger, "listen", i,
			"address", addr, "err", err, "serving", cur.Subject, "not_after", cur.NotAfter)
	case changed:
		s.logger.Info("reload: TLS certificate replaced", "trigger", trigger, "listen", i, "address", addr,
			"subject", cur.Subject, "not_after", cur.NotAfter, "sha256", cur.SHA256)
	default:
		s.logger.Info("reload: TLS certificate unchanged", "trigger", trigger, "listen", i, "address", addr,
			"subject", cur.Subject, "not_after", cur.NotAfter)
	}
}
