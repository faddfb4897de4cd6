package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness/httpfault"
	"github.com/idemcheck/idemcheck/harness/httpload"
)

// targetTLS is what https targets are trusted by: the CA certificates in
// the PEM file caFile ("": the system's), or, insecure, any certificate
// (a test service's own).
func targetTLS(caFile string, insecure bool) (*tls.Config, error) {
	conf := &tls.Config{InsecureSkipVerify: insecure} // --insecure asks for it, for test certificates
	if caFile == "" {
		return conf, nil
	}
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, usagef("http: --cacert: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, usagef("http: --cacert %s: no PEM certificate in it", caFile)
	}
	conf.RootCAs = pool
	return conf, nil
}

// tlsFor is the TLS of the target at u: nil for http; for https, base
// asking for the target's own name (its SNI and its certificate), since
// the clients connect to the address of its fault proxy.
func tlsFor(base *tls.Config, u *url.URL) *tls.Config {
	if u.Scheme != "https" {
		return nil
	}
	c := base.Clone()
	c.ServerName = u.Hostname()
	return c
}

// hostPort is u's host with its port, the scheme's default when it has
// none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// isHTTPS reports whether a --target URL is an https one.
func isHTTPS(target string) bool {
	u, err := url.Parse(target)
	return err == nil && u.Scheme == "https"
}

// pingInstance is the readiness ping of an instance started with --cmd
// at u (http://address/), spoken to over scheme: an untrusted
// certificate is for good ([httpfault.Permanent]).
func pingInstance(ctx context.Context, u, scheme string, base *tls.Config) error {
	if scheme == "https" {
		u = "https://" + strings.TrimPrefix(u, "http://")
	}
	p, _ := url.Parse(u)
	err := httpload.Ping(ctx, u, tlsFor(base, p), time.Second)
	if errors.Is(err, httpload.ErrUntrusted) {
		return httpfault.Permanent(fmt.Errorf("%v: %s", err, trustHelp))
	}
	return err
}

// trustHelp is what to give for an untrusted certificate.
const trustHelp = "give its CA with --cacert FILE (PEM), or --insecure to accept any certificate (a test one)"

// untrusted adds to a target's untrusted certificate what to give.
func untrusted(err error) error {
	if errors.Is(err, httpload.ErrUntrusted) {
		return usagef("http: %v: %s", err, trustHelp)
	}
	return err
}

// tlsDeclared says, for the report, what https targets were trusted by,
// and what TLS leaves out of the faults.
func tlsDeclared(caFile string, insecure bool) string {
	trust := "certificates verified against the system's CAs"
	switch {
	case insecure:
		trust = "any certificate accepted (--insecure)"
	case caFile != "":
		trust = fmt.Sprintf("certificates verified against %s (--cacert)", caFile)
	}
	return "TLS: " + trust + "; a lost reply is lost with the TLS handshake, before the request is sent (replies lost after the request ran are tested over plain HTTP only)"
}
