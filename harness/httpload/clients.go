package httpload

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

// Target is one instance of the service under test: its name in reports
// and the URL the clients POST to (through the instance's fault proxy).
type Target struct {
	Name string
	URL  string
	// Host is the Host header its requests carry ("": the URL's): the
	// instance's own address when the URL is a proxy's in front of it,
	// or one for every instance ([ServiceHost]).
	Host string
	// TLS is what an https URL's connections trust, and the name they
	// ask for (ServerName: the instance's own, for SNI and its
	// certificate, since the URL is a proxy's address); nil for http.
	TLS *tls.Config
}

// ServiceHost is the Host header requests to every one of urls carry:
// the first's host and port when they all share one host name (instances
// of one service on several ports, which a load balancer in front of
// them would present under one name; localhost and loopback addresses
// are one), else "" (each its own). A service whose fingerprint covers
// its own URL (Starlette's request.url does) would otherwise take a
// retry sent to another instance for another request.
func ServiceHost(urls []string) string {
	var first *url.URL
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			return ""
		}
		if first == nil {
			first = u
		} else if hostName(u) != hostName(first) {
			return ""
		}
	}
	if first == nil {
		return ""
	}
	return first.Host
}

// hostName is u's host name, every name of this machine's loopback
// (localhost, 127.0.0.1, ::1) one.
func hostName(u *url.URL) string {
	h := u.Hostname()
	if ip := net.ParseIP(h); h == "localhost" || ip != nil && ip.IsLoopback() {
		return "loopback"
	}
	return h
}

// Mix is the share of each kind of operation a client draws; the rest are
// new keys. Shares are fractions of 1.
type Mix struct {
	Race, Replay, Reuse, Missing, Long float64
}

// DefaultMix sends mostly new keys, with a few of every other kind.
var DefaultMix = Mix{Race: 0.15, Replay: 0.15, Reuse: 0.08, Missing: 0.03, Long: 0.03}

// Config is one black-box workload.
type Config struct {
	Targets  []Target
	Clients  int
	Duration time.Duration
	Seed     int64
	// RunID prefixes every key and order, so that runs against one
	// long-lived service never share a key.
	RunID string
	// Random spreads requests over the instances at random instead of
	// round-robin.
	Random bool
	// MaxKeyLen is the longest key the service accepts: over-long keys
	// are one byte longer. 0 sends none.
	MaxKeyLen int
	// Timeout bounds one request; MaxAttempts bounds an operation's
	// attempts (retries use the same key and body).
	Timeout     time.Duration
	MaxAttempts int
	Mix         Mix
	// Request is the shape of every request (method, headers, key format,
	// body); [Request.Normalize] fills in its defaults.
	Request Request
}

// keyState is what the workload remembers of a key, for replays, reuses
// and the final probes.
type keyState struct {
	key, order, body string
	amount           int  // the amount in body
	settled          bool // the last answer was definite (2xx or 4xx but 409)
	// contested says two of its requests may have been in the service
	// at once: a race request went beside its first, or an attempt got
	// no definite answer before the next went (its work may go on). An
	// owner that lost its claim may then have saved over the key's
	// answer unseen: the final probes read it back ([Load.Probe]).
	contested bool
}

// Load runs the clients of one black-box run and remembers their keys.
type Load struct {
	cfg  Config
	hist *history.History
	http map[string]*http.Client // by target name
	seq  atomic.Int64            // the %d of key patterns
	// fresh numbers the orders of the fresh keys sent beside refused
	// probes (sendFresh), each order new to the run.
	fresh atomic.Int64

	mu   sync.Mutex
	keys []*keyState
	used map[string]bool // the keys drawn for operations so far (freshKey)
}

// New prepares a workload writing to h.
func New(cfg Config, h *history.History) (*Load, error) {
	if len(cfg.Targets) == 0 {
		return nil, errors.New("no target")
	}
	if cfg.Clients <= 0 || cfg.MaxAttempts <= 0 || cfg.Timeout <= 0 {
		return nil, fmt.Errorf("clients (%d), attempts (%d) and timeout (%v) must be positive", cfg.Clients, cfg.MaxAttempts, cfg.Timeout)
	}
	var err error
	if cfg.Request, err = cfg.Request.Normalize(); err != nil {
		return nil, err
	}
	// One connection per request (no keep-alive): a fault that tears a
	// connection down hits exactly one request, and Go's transport never
	// resends a request on its own (it would for a reused connection, as
	// it treats a request with an Idempotency-Key as idempotent).
	// A client per target: each its own TLS (an https target's name).
	l := &Load{cfg: cfg, hist: h, http: map[string]*http.Client{}, used: map[string]bool{}}
	for _, t := range cfg.Targets {
		tr := &http.Transport{DisableKeepAlives: true, Proxy: nil, DialContext: (&net.Dialer{Timeout: cfg.Timeout}).DialContext, TLSClientConfig: t.TLS}
		l.http[t.Name] = &http.Client{Transport: tr, Timeout: cfg.Timeout}
	}
	return l, nil
}

// Run runs the clients until the duration is over or ctx ends.
func (l *Load) Run(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	for c := 0; c < l.cfg.Clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			l.client(ctx, c)
		}(c)
	}
	wg.Wait()
}

// client is one client's loop: it draws an operation and runs it.
func (l *Load) client(ctx context.Context, c int) {
	rng := rand.New(rand.NewSource(l.cfg.Seed*1000003 + int64(c)))
	next := c // round-robin position
	pick := func() Target {
		if l.cfg.Random {
			return l.cfg.Targets[rng.Intn(len(l.cfg.Targets))]
		}
		next++
		return l.cfg.Targets[next%len(l.cfg.Targets)]
	}
	var mine []*keyState
	m := l.cfg.Mix
	keys := newKeys(l.cfg.Request.KeyFormat, l.cfg.RunID, l.cfg.Seed, c, &l.seq)
	for n := 0; ctx.Err() == nil; n++ {
		order := fmt.Sprintf("%s-c%d-o%d", l.cfg.RunID, c, n)
		amount := 100 + rng.Intn(900)
		body, err := l.cfg.Request.body(order, amount)
		if err != nil { // Normalize built one: cannot happen
			panic(err)
		}
		r := rng.Float64()
		switch {
		case r < m.Race:
			ks := l.newKey(l.freshKey(keys), order, body, amount)
			mine = append(mine, ks)
			a, b := pick(), pick()
			var wg sync.WaitGroup
			l.mu.Lock()
			ks.contested = true
			l.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.send(ctx, c, b, history.PurposeRace, ks.key, true, order, body, 1)
			}()
			l.operation(ctx, c, a, pick, ks, history.PurposeFirst, rng)
			wg.Wait()
		case r < m.Race+m.Replay && len(mine) > 0:
			ks := mine[rng.Intn(len(mine))]
			l.send(ctx, c, pick(), history.PurposeReplay, ks.key, true, ks.order, ks.body, 1)
		case r < m.Race+m.Replay+m.Reuse && len(mine) > 0:
			ks := mine[rng.Intn(len(mine))]
			other := &keyState{key: ks.key, order: order, body: body, amount: amount}
			if rng.Intn(2) == 0 {
				// Every other reuse changes the order alone: a service
				// whose fingerprint leaves the order out (the amount
				// only) replays the key's answer to it, where a reuse
				// changing both got its 422 and passed.
				other.amount = ks.amount
				if other.body, err = l.cfg.Request.body(order, ks.amount); err != nil {
					panic(err)
				}
			}
			l.operation(ctx, c, pick(), pick, other, history.PurposeReuse, rng)
		case r < m.Race+m.Replay+m.Reuse+m.Missing:
			purpose := history.PurposeMissing
			if l.cfg.Request.KeyOptional {
				purpose = history.PurposeNoKey
			}
			l.send(ctx, c, pick(), purpose, "", false, order, body, 1)
		case r < m.Race+m.Replay+m.Reuse+m.Missing+m.Long && l.cfg.MaxKeyLen > 0:
			key := keys.next() + "-"
			key += strings.Repeat("x", max(0, l.cfg.MaxKeyLen+1-len(key)))
			l.send(ctx, c, pick(), history.PurposeLong, key, true, order, body, 1)
		default:
			ks := l.newKey(l.freshKey(keys), order, body, amount)
			mine = append(mine, ks)
			l.operation(ctx, c, pick(), pick, ks, history.PurposeFirst, rng)
		}
	}
}

// freshKey draws a key for a new operation that no operation of the run
// has had: a pattern of few random digits (--key-format '%4x') drew the
// same key for two operations, and the second got the first's answer or
// a 422, untested. It draws again up to freshTries times; a pattern with
// no fresh key left gives a used one, which the answers checker says.
func (l *Load) freshKey(k *keys) string {
	var key string
	for range freshTries {
		key = k.next()
		l.mu.Lock()
		fresh := !l.used[key]
		l.used[key] = true
		l.mu.Unlock()
		if fresh {
			break
		}
	}
	return key
}

// freshTries bounds the draws of freshKey for one operation.
const freshTries = 64

func (l *Load) newKey(key, order, body string, amount int) *keyState {
	ks := &keyState{key: key, order: order, body: body, amount: amount}
	l.mu.Lock()
	l.keys = append(l.keys, ks)
	l.mu.Unlock()
	return ks
}

// maxRetryAfter bounds how long a client honours an answer's
// Retry-After: a limiter's advice, not a pause of the run.
const maxRetryAfter = 2 * time.Second

// operation sends ks's body with its key until a definite answer (see
// [history.Final]) or MaxAttempts, retrying on no answer, 409, 423, 429
// and 5xx with the same key and body, each retry to the next instance,
// after a backoff, or after the answer's Retry-After when it says longer
// (up to maxRetryAfter), as a well-behaved client waits for a limiter.
func (l *Load) operation(ctx context.Context, c int, first Target, pick func() Target, ks *keyState, purpose string, rng *rand.Rand) {
	t := first
	for a := 1; a <= l.cfg.MaxAttempts && ctx.Err() == nil; a++ {
		x, retryAfter := l.send(ctx, c, t, purpose, ks.key, true, ks.order, ks.body, a)
		l.mu.Lock()
		ks.settled = history.Final(x.Status)
		ks.contested = ks.contested || !ks.settled && a < l.cfg.MaxAttempts
		l.mu.Unlock()
		if ks.settled {
			return
		}
		if purpose != history.PurposeReuse { // a reuse stays one, for the checker
			purpose = history.PurposeRetry
		}
		backoff := min(10*time.Millisecond<<(a-1), 200*time.Millisecond)
		sleep(ctx, max(backoff+time.Duration(rng.Int63n(int64(backoff))), min(retryAfter, maxRetryAfter)))
		t = pick()
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// send makes one request and records it; it returns the answer's
// Retry-After too (0 without one).
func (l *Load) send(ctx context.Context, c int, t Target, purpose, key string, hasKey bool, order, body string, attempt int) (history.Exchange, time.Duration) {
	x := history.Exchange{Client: c, Instance: t.Name, Purpose: purpose, Key: key, HasKey: hasKey,
		Order: order, Body: body, Attempt: attempt}
	wire := body
	var err error
	if hasKey && l.cfg.Request.KeyAt != "" {
		if wire, err = l.cfg.Request.withKey(body, key); err != nil { // Normalize made one: cannot happen
			panic(err)
		}
	}
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), l.cfg.Request.Method, t.URL, bytes.NewReader([]byte(wire)))
	if err != nil {
		x.Call, x.Return, x.Err = l.hist.Now(), history.Never, err.Error()
		l.hist.AddExchange(x)
		return x, 0
	}
	req.Host = t.Host
	req.Header.Set("Content-Type", l.cfg.Request.contentType())
	for k, vs := range l.cfg.Request.Header {
		req.Header[k] = append([]string(nil), vs...)
	}
	if hasKey && l.cfg.Request.KeyAt == "" {
		req.Header.Set(l.cfg.Request.KeyHeader, key)
	}
	x.Call = l.hist.Now()
	l.hist.Sending(x)
	resp, err := l.http[t.Name].Do(req)
	var wait time.Duration
	if err == nil {
		wait = retryAfter(resp.Header.Get("Retry-After"), time.Now())
		var b []byte
		b, err = readReply(resp)
		resp.Body.Close()
		if err == nil {
			x.Return, x.Status, x.Reply = l.hist.Now(), resp.StatusCode, strings.TrimSpace(string(b))
			x.RetryAfter = int64(wait)
		}
	}
	if err != nil {
		x.Return, x.Err, x.ErrAt = history.Never, shortErr(err), l.hist.Now()
	}
	l.hist.AddExchange(x)
	return x, wait
}

// retryAfter is how long a Retry-After header (RFC 9110: seconds, or an
// HTTP date) asks to wait, as of now; 0 for none or one it cannot read.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(h); err == nil {
		return max(time.Duration(s)*time.Second, 0)
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// shortErr names a transport error briefly (the URL is in the record).
func shortErr(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed without an answer"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return err.Error()
}

// ErrUntrusted marks an https target whose certificate its client does
// not trust.
var ErrUntrusted = errors.New("its certificate is not trusted")

// Ping asks the target for any HTTP answer (a GET, which a service
// answers, if only with 404 or 405) and says, in one line, why it is not
// an HTTP server when it is not: a refused port, a server that speaks
// something else, one that does not answer within timeout, or (https,
// over conf) a certificate it does not trust ([ErrUntrusted]).
func Ping(ctx context.Context, url string, conf *tls.Config, timeout time.Duration) error {
	cl := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil, TLSClientConfig: conf}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("target %s: %v", url, err)
	}
	resp, err := cl.Do(req)
	if err != nil {
		var ne net.Error
		var bad *tls.CertificateVerificationError
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			return fmt.Errorf("target %s: connection refused (nothing listens there)", url)
		case errors.As(err, &bad):
			return fmt.Errorf("target %s: %w (%v)", url, ErrUntrusted, bad.Err)
		case errors.As(err, &ne) && ne.Timeout():
			return fmt.Errorf("target %s: no HTTP answer within %v", url, timeout)
		case strings.Contains(err.Error(), "malformed HTTP"):
			return fmt.Errorf("target %s: %w: it answered, but not in HTTP", url, errNotHTTP)
		case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return fmt.Errorf("target %s: %w: it closed the connection without an HTTP answer", url, errNotHTTP)
		}
		return fmt.Errorf("target %s: %v", url, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return nil
}
