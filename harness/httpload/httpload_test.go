package httpload_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/httpcheck"
	"github.com/idemcheck/idemcheck/harness/httpload"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// service is a minimal payment API over stores.Run: the store is shared
// by the instances that are given the same one. Its fingerprint covers
// the URL it was asked at, Host included (as one over Starlette's
// request.url does), and the body: correct behind one name
// (httpload.ServiceHost).
func service(t *testing.T, store stores.Store, provider string) http.Handler {
	return serviceBy(t, store, provider, func(r *http.Request, body []byte) []byte {
		return append([]byte("http://"+r.Host+r.URL.Path+"\n"), body...)
	})
}

// amountOnly is service with a fingerprint of the amount alone: a key
// reused for another order of the same amount replays the key's answer.
func amountOnly(t *testing.T, store stores.Store, provider string) http.Handler {
	return serviceBy(t, store, provider, func(_ *http.Request, body []byte) []byte {
		var o struct {
			Amount int `json:"amount"`
		}
		_ = json.Unmarshal(body, &o)
		return []byte(fmt.Sprint(o.Amount))
	})
}

// serviceBy is service with the fingerprint of fp's bytes.
func serviceBy(t *testing.T, store stores.Store, provider string, fp func(r *http.Request, body []byte) []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var o struct {
			Order string `json:"order"`
		}
		if r.Method != http.MethodPost || json.Unmarshal(body, &o) != nil {
			w.WriteHeader(http.StatusOK) // the ping
			return
		}
		sum := sha256.Sum256(fp(r, body))
		req := stores.Request{KeyRef: stores.KeyRef{Key: r.Header.Get("Idempotency-Key")}, Fingerprint: hex.EncodeToString(sum[:]), Now: time.Now()}
		res, err := stores.Run(context.WithoutCancel(r.Context()), store, req, stores.SaveError, func(ctx context.Context, _ stores.Token) (stores.Response, error) {
			resp, err := http.Post(provider, "application/json", bytes.NewReader(body))
			if err != nil {
				return stores.Response{}, err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				return stores.Response{}, fmt.Errorf("provider: %d", resp.StatusCode)
			}
			return stores.Response{Status: 200, Body: string(b)}, nil
		})
		if err != nil {
			http.Error(w, err.Error(), stores.HTTPStatus(err))
			return
		}
		w.WriteHeader(res.Response.Status)
		io.WriteString(w, res.Response.Body)
	})
}

func newStore(t *testing.T) stores.Store {
	s, err := memory.New(stores.Config{LockTTL: 5 * time.Second, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// purposes are the kinds of request the clients must have sent for a run
// to be judged: a second of traffic on a loaded machine may not hold them.
var purposes = []string{history.PurposeFirst, history.PurposeRace, history.PurposeReplay, history.PurposeReuse, history.PurposeMissing, history.PurposeLong}

// run drives two instances (sharing one store, or each with its own) in
// rounds of a second, each round with its own keys and orders, until
// every one of purposes was sent (at most maxRounds), and returns the
// history and the checkers' verdicts.
func run(t *testing.T, shared bool) (*history.History, []httpcheck.Result) {
	return runOn(t, shared, service)
}

// runOn is run on the instances svc makes.
func runOn(t *testing.T, shared bool, svc func(*testing.T, stores.Store, string) http.Handler) (*history.History, []httpcheck.Result) {
	const maxRounds = 20
	h, l := history.New(), history.NewLedger()
	p, err := httpload.StartProvider(httpload.ProviderConfig{Latency: 5 * time.Millisecond, FailRate: 0.05, Seed: 1}, h, l, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	one := newStore(t)
	var targets []httpload.Target
	for i := 1; i <= 2; i++ {
		st := one
		if !shared {
			st = newStore(t)
		}
		name := fmt.Sprintf("i%d", i)
		srv := httptest.NewServer(svc(t, st, p.URL(name)))
		defer srv.Close()
		if err := httpload.Ping(context.Background(), srv.URL, nil, time.Second); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, httpload.Target{Name: name, URL: srv.URL + "/orders"})
	}
	host := httpload.ServiceHost([]string{targets[0].URL, targets[1].URL})
	for i := range targets {
		targets[i].Host = host
	}
	var loads []*httpload.Load
	for round := 1; len(missing(h)) > 0; round++ {
		if round > maxRounds {
			t.Fatalf("%d rounds of a second never sent %v: %v", maxRounds, missing(h), sent(h))
		}
		load, err := httpload.New(httpload.Config{Targets: targets, Clients: 4, Duration: time.Second, Seed: int64(round), RunID: fmt.Sprintf("t%d", round),
			MaxKeyLen: stores.MaxKeyLen, Timeout: 2 * time.Second, MaxAttempts: 4, Mix: httpload.DefaultMix}, h)
		if err != nil {
			t.Fatal(err)
		}
		load.Run(context.Background())
		loads = append(loads, load)
	}
	for _, load := range loads {
		load.Probe(context.Background(), 3*time.Second)
	}
	return h, httpcheck.Run(httpcheck.Evidence{Hist: h, Ledger: l})
}

// sent counts the history's requests by purpose.
func sent(h *history.History) map[string]int {
	n := map[string]int{}
	for _, x := range h.Exchanges() {
		n[x.Purpose]++
	}
	return n
}

// missing lists the purposes the history holds no request of.
func missing(h *history.History) []string {
	n := sent(h)
	var out []string
	for _, p := range purposes {
		if n[p] == 0 {
			out = append(out, p)
		}
	}
	return out
}

// TestSharedStorePassesPerInstanceStoreFails: through the whole chain
// (clients, provider, history, checkers), two instances over one store
// pass every checker, and two instances each with its own map charge
// orders twice.
func TestSharedStorePassesPerInstanceStoreFails(t *testing.T) {
	_, results := run(t, true)
	for _, r := range results {
		if !r.Pass {
			t.Errorf("shared store: %s failed: %s", r.Checker, r.Detail)
		}
	}
	_, results = run(t, false)
	for _, r := range results {
		if r.Checker == httpcheck.AtMostOnce && r.Pass {
			t.Errorf("a store per instance passed at-most-once: %s", r.Detail)
		}
	}
}

// TestAmountOnlyFingerprintFails: a service whose fingerprint leaves
// the order out (the amount alone) replays a key's answer to a reuse
// for another order of the same amount, and fails status-codes; every
// reuse changed the amount too, each got its 422, and it passed.
func TestAmountOnlyFingerprintFails(t *testing.T) {
	_, results := runOn(t, true, amountOnly)
	for _, r := range results {
		if r.Checker != httpcheck.Status {
			continue
		}
		if r.Pass || r.Violations[0].Cause != httpcheck.CauseReuse {
			t.Fatalf("a fingerprint of the amount alone: status-codes %+v", r)
		}
		return
	}
	t.Fatal("no status-codes result")
}

// TestServiceHost: instances on one host name share the first's Host;
// targets on several names keep their own.
func TestServiceHost(t *testing.T) {
	for _, c := range []struct {
		urls []string
		want string
	}{
		{[]string{"http://127.0.0.1:8080/orders", "http://127.0.0.1:8081/orders"}, "127.0.0.1:8080"},
		{[]string{"http://localhost/orders"}, "localhost"},
		{[]string{"http://127.0.0.1:8080/orders", "http://localhost:8081/orders", "http://[::1]:8082/orders"}, "127.0.0.1:8080"},
		{[]string{"http://a.example:80/orders", "http://b.example:80/orders"}, ""},
		{nil, ""},
	} {
		if got := httpload.ServiceHost(c.urls); got != c.want {
			t.Errorf("ServiceHost(%v) = %q, want %q", c.urls, got, c.want)
		}
	}
}

// TestClientsHonourRetryAfter: a limiter that refuses each key's first
// attempt with 429 and Retry-After: 1 gets the key's retry no sooner
// than a second later, and then serves it.
func TestClientsHonourRetryAfter(t *testing.T) {
	h, l := history.New(), history.NewLedger()
	p, err := httpload.StartProvider(httpload.ProviderConfig{Seed: 1}, h, l, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	svc := service(t, newStore(t), p.URL("i1"))
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		first := r.Method == http.MethodPost && key != "" && !seen[key]
		seen[key] = true
		mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		svc.ServeHTTP(w, r)
	}))
	defer srv.Close()
	load, err := httpload.New(httpload.Config{Targets: []httpload.Target{{Name: "i1", URL: srv.URL + "/orders"}}, Clients: 2, Duration: 2 * time.Second,
		Seed: 1, RunID: "ra", MaxKeyLen: 0, Timeout: 2 * time.Second, MaxAttempts: 3, Mix: httpload.Mix{}}, h)
	if err != nil {
		t.Fatal(err)
	}
	load.Run(context.Background())
	refused := map[string]history.Exchange{}
	retried := 0
	for _, x := range h.Exchanges() {
		switch {
		case x.Attempt == 1 && x.Status == http.StatusTooManyRequests:
			refused[x.Key] = x
		case x.Attempt == 2:
			r, ok := refused[x.Key]
			if !ok {
				continue
			}
			retried++
			if gap := time.Duration(x.Call - r.Return); gap < time.Second {
				t.Errorf("key %s retried %v after its 429 with Retry-After: 1", x.Key, gap)
			}
			if x.Status != http.StatusOK {
				t.Errorf("key %s: its retry got %d", x.Key, x.Status)
			}
		}
	}
	if retried == 0 {
		t.Fatalf("no key was retried after its 429: %v", sent(h))
	}
}

// TestProbesTakeTurns: every unsettled key is probed across the whole
// settle window, not one key after the other. The service holds each key
// (409) for a while after its first probe, as one draining what the load
// left it does; with more keys than the probes could see through one at
// a time, every key must still end on its answer.
func TestProbesTakeTurns(t *testing.T) {
	const holdFor = 1500 * time.Millisecond
	var probing atomic.Bool
	var mu sync.Mutex
	first := map[string]time.Time{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond)
		key := r.Header.Get("Idempotency-Key")
		if !probing.Load() || key == "" {
			w.WriteHeader(http.StatusConflict)
			return
		}
		mu.Lock()
		f, ok := first[key]
		if !ok {
			f = time.Now()
			first[key] = f
		}
		mu.Unlock()
		if time.Since(f) < holdFor {
			w.WriteHeader(http.StatusConflict)
			return
		}
		fmt.Fprint(w, `{"charge":"ch_1"}`)
	}))
	defer srv.Close()
	h, load := loadToProbe(t, srv.URL, 16, 300*time.Millisecond, "turns", &probing)
	const settle = 4 * time.Second
	n := load.Probe(context.Background(), settle)
	// One key after the other, each held holdFor, 16 at a time: settle
	// sees this many through.
	if oneByOne := int(16 * settle / holdFor); n <= 2*oneByOne {
		t.Fatalf("%d keys to probe: too few to tell (want more than %d)", n, 2*oneByOne)
	}
	last := lastProbes(h)
	held := 0
	for _, x := range last {
		if x.Status != http.StatusOK {
			held++
		}
	}
	if len(last) != n || held > 0 {
		t.Errorf("%d keys to probe, %d probed, %d of them still held at the end: want every key probed to its answer", n, len(last), held)
	}
}

// TestProbesOutwaitAGateway: behind a proxy, an instance restarting
// answers a key's probes 502 (the proxy's page) for longer than a second,
// then the key's saved answer. The probes went on only a second past a
// repeated 502, and a key with a saved success ended on a 502, which
// liveness takes for its answer lost: they now go on until settle.
func TestProbesOutwaitAGateway(t *testing.T) {
	const awayFor = 2500 * time.Millisecond
	var probing atomic.Bool
	var mu sync.Mutex
	var since time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !probing.Load() {
			w.WriteHeader(http.StatusConflict)
			return
		}
		mu.Lock()
		if since.IsZero() {
			since = time.Now()
		}
		away := time.Since(since) < awayFor
		mu.Unlock()
		if away {
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, "<html>502 Bad Gateway</html>")
			return
		}
		fmt.Fprint(w, `{"charge":"ch_1"}`)
	}))
	defer srv.Close()
	h, load := loadToProbe(t, srv.URL, 2, 200*time.Millisecond, "gateway", &probing)
	if n := load.Probe(context.Background(), 8*time.Second); n == 0 {
		t.Fatal("no key to probe")
	}
	last := lastProbes(h)
	for k, x := range last {
		if x.Status != http.StatusOK {
			t.Errorf("key %s ended its probes on %d, want its answer once the gateway's instance was back", k, x.Status)
		}
	}
}

// lastProbes is each probed key's last probe.
func lastProbes(h *history.History) map[string]history.Exchange {
	last := map[string]history.Exchange{}
	for _, x := range h.Exchanges() {
		if x.Purpose == history.PurposeProbe {
			last[x.Key] = x
		}
	}
	return last
}

// loadToProbe runs a load of clients on url's /orders for d, then sets
// probing (the service's cue that the final probes come): the history
// and the load, to probe.
func loadToProbe(t *testing.T, url string, clients int, d time.Duration, runID string, probing *atomic.Bool) (*history.History, *httpload.Load) {
	t.Helper()
	h := history.New()
	load, err := httpload.New(httpload.Config{Targets: []httpload.Target{{Name: "i1", URL: url + "/orders"}}, Clients: clients,
		Duration: d, Seed: 1, RunID: runID, MaxKeyLen: stores.MaxKeyLen, Timeout: time.Second, MaxAttempts: 1}, h)
	if err != nil {
		t.Fatal(err)
	}
	load.Run(context.Background())
	probing.Store(true)
	return h, load
}
