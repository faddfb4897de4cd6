// Package httpload is the traffic of a black-box run (idemcheck http):
// concurrent clients that POST to a service's instances with an
// Idempotency-Key, retry with the same key, reuse keys with other bodies
// and send missing and over-long keys, recording every request and
// answer in the history; and the fake payment provider the service calls
// once per effect, which records every effect in the ledger. It is a
// producer: it writes the history and never judges it.
package httpload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

// ProviderConfig tunes the fake payment provider.
type ProviderConfig struct {
	// Latency is how long a charge takes (plus up to Latency of jitter):
	// the window in which two executions of one order can overlap.
	Latency time.Duration
	// FailRate is the share of charges that take effect and then answer
	// 503, as a provider whose reply times out does: the service cannot
	// tell that the charge went through. 0 disables it.
	FailRate float64
	// Seed draws the latencies and the failures.
	Seed int64
}

// Provider is the fake downstream payment provider, served over HTTP on
// 127.0.0.1. Every POST to /charge (or /i/<instance>/charge, so that the
// ledger knows which instance asked) with a JSON body {"order": ...} (or
// a form body order=...) is one effect, counted per order in the ledger.
// It answers {"charge": "ch_N"}, or 503 for the failures it draws.
type Provider struct {
	cfg    ProviderConfig
	hist   *history.History
	ledger *history.Ledger
	srv    *http.Server
	ln     net.Listener

	mu    sync.Mutex
	rng   *rand.Rand
	keyed map[string]*keyedCharge // by the downstream key the service sent
}

// keyedCharge is the effect a downstream idempotency key made.
type keyedCharge struct {
	order, id string
	done      chan struct{} // closed once the provider answered it (or the service hung up)
}

// StartProvider serves the provider on port of 127.0.0.1 (0: a free one);
// effects go to ledger, at times of h's clock.
func StartProvider(cfg ProviderConfig, h *history.History, ledger *history.Ledger, port int) (*Provider, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("payment provider: %v", err)
	}
	p := &Provider{cfg: cfg, hist: h, ledger: ledger, ln: ln, rng: rand.New(rand.NewSource(cfg.Seed)), keyed: map[string]*keyedCharge{}}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the charge endpoint for the named instance ("" for a service
// whose instances all share one URL).
func (p *Provider) URL(instance string) string {
	if instance == "" {
		return "http://" + p.ln.Addr().String() + "/charge"
	}
	return "http://" + p.ln.Addr().String() + "/i/" + instance + "/charge"
}

// Close stops serving.
func (p *Provider) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return p.srv.Shutdown(ctx)
}

// draw returns this charge's delay and whether it fails after the effect.
func (p *Provider) draw() (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.cfg.Latency
	if d > 0 {
		d += time.Duration(p.rng.Int63n(int64(d) + 1))
	}
	return d, p.cfg.FailRate > 0 && p.rng.Float64() < p.cfg.FailRate
}

// ServeHTTP applies one charge. The order is read from a JSON body
// {"order": ...} or a form body order=...; the charge takes effect as
// soon as the request is read, then the provider waits its latency and
// answers {"charge": "ch_N"}, or 503 for a failure it drew. The ledger
// records the effect, the outcome and when it was answered: a service
// that hangs up first leaves [history.OutcomeHungUp]. A request with an
// Idempotency-Key header (the service's downstream key) whose key made an
// effect before makes none ([Provider.repeat]): a service that sends one
// key per order may retry its charge safely, as with a real provider.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	via, ok := instanceOf(r.URL.Path)
	if !ok || r.Method != http.MethodPost {
		http.Error(w, "POST /charge or /i/<instance>/charge", http.StatusNotFound)
		return
	}
	order, err := orderOf(r, w)
	if err != nil || order == "" {
		http.Error(w, `want a JSON body {"order": "..."} or a form body order=...`, http.StatusBadRequest)
		return
	}
	key := r.Header.Get(DefaultKeyHeader)
	p.mu.Lock()
	prior := p.keyed[key]
	if key != "" && prior == nil {
		k := &keyedCharge{order: order, done: make(chan struct{})}
		k.id = p.ledger.Effect(order, via, key, p.hist.Now())
		p.keyed[key] = k
		defer close(k.done)
		p.mu.Unlock()
		p.charge(w, r, k.id)
		return
	}
	p.mu.Unlock()
	if prior != nil {
		p.repeat(w, r, prior, order, via, key)
		return
	}
	p.charge(w, r, p.ledger.Effect(order, via, "", p.hist.Now()))
}

// charge waits the provider's latency and answers the effect id: its
// charge id, or the failure drawn.
func (p *Provider) charge(w http.ResponseWriter, r *http.Request, id string) {
	delay, fail := p.draw()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	if r.Context().Err() != nil {
		p.ledger.Answer(id, history.OutcomeHungUp, p.hist.Now())
		return
	}
	if fail {
		p.ledger.Answer(id, history.OutcomeFailed, p.hist.Now())
		http.Error(w, "provider timeout (the charge went through)", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(map[string]string{"charge": id})
	_, err := w.Write(append(b, '\n'))
	outcome := history.OutcomeCharged
	if err != nil {
		outcome = history.OutcomeHungUp
	}
	p.ledger.Answer(id, outcome, p.hist.Now())
}

// repeat answers a charge request whose downstream key made an effect
// before, as Stripe answers a repeated Idempotency-Key: with that
// effect's charge id once it was answered (a retry after a reply lost or
// failed gets the charge that went through), 409 while it is still being
// made, 422 for a key sent with another order; at once, never failing.
// No effect either way.
func (p *Provider) repeat(w http.ResponseWriter, r *http.Request, k *keyedCharge, order, via, key string) {
	p.ledger.Deduplicated(order, via, key, k.id, p.hist.Now())
	if order != k.order {
		http.Error(w, fmt.Sprintf("idempotency key %q was used for order %q", key, k.order), http.StatusUnprocessableEntity)
		return
	}
	select {
	case <-k.done:
	default:
		http.Error(w, "a request with this idempotency key is in progress", http.StatusConflict)
		return
	}
	// At once: the latency is the charge's work, and a repeat does none
	// (an owner kept waiting here would hold its key past the probes).
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Idempotent-Replayed", "true")
	b, _ := json.Marshal(map[string]string{"charge": k.id})
	_, _ = w.Write(append(b, '\n'))
}

// orderOf reads the order a charge request names.
func orderOf(r *http.Request, w http.ResponseWriter) (string, error) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		if err := r.ParseForm(); err != nil {
			return "", err
		}
		return r.PostForm.Get("order"), nil
	}
	var body struct {
		Order string `json:"order"`
	}
	err := json.NewDecoder(r.Body).Decode(&body)
	return body.Order, err
}

// instanceOf reads the instance from /i/<instance>/charge ("" for /charge).
func instanceOf(path string) (string, bool) {
	if path == "/charge" {
		return "", true
	}
	rest, ok := strings.CutPrefix(path, "/i/")
	if !ok {
		return "", false
	}
	inst, tail, ok := strings.Cut(rest, "/")
	if !ok || tail != "charge" || inst == "" {
		return "", false
	}
	return inst, true
}

// errNotHTTP marks a target that answered, but not in HTTP.
var errNotHTTP = errors.New("not an HTTP server")
