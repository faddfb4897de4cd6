package httpload_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/httpload"
	"github.com/idemcheck/idemcheck/stores"
)

// TestKeyHeader: with Request.KeyHeader set, every keyed request carries
// its key in that header and none in Idempotency-Key, and a request sent
// without a key carries neither, as a service that reads its key from a
// header of its own sees them over a real connection.
func TestKeyHeader(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{} // the key each request carried, by the header it came in
	var inDefault, keyless int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("Idempotency-Key") != "" {
			inDefault++
		}
		k := r.Header.Get("X-Request-Key")
		if k == "" {
			keyless++
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		got[k] = k
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	h := history.New()
	load, err := httpload.New(httpload.Config{Targets: []httpload.Target{{Name: "i1", URL: srv.URL + "/orders"}}, Clients: 2,
		Duration: 300 * time.Millisecond, Seed: 1, RunID: "kh", MaxKeyLen: stores.MaxKeyLen, Timeout: time.Second, MaxAttempts: 2,
		Mix: httpload.Mix{Missing: 0.3}, Request: httpload.Request{KeyHeader: "x-request-key"}}, h)
	if err != nil {
		t.Fatal(err)
	}
	load.Run(context.Background())
	mu.Lock()
	defer mu.Unlock()
	sentKeyed, sentKeyless := 0, 0
	for _, x := range h.Exchanges() {
		if x.HasKey {
			sentKeyed++
			if _, ok := got[x.Key]; !ok {
				t.Fatalf("key %s was sent, but the service never saw it in X-Request-Key", x.Key)
			}
		} else {
			sentKeyless++
		}
	}
	if sentKeyed == 0 || sentKeyless == 0 || inDefault != 0 || keyless != sentKeyless {
		t.Errorf("sent %d keyed and %d keyless requests; the service saw %d keyless and %d with Idempotency-Key", sentKeyed, sentKeyless, keyless, inDefault)
	}
	for _, bad := range []httpload.Request{{KeyHeader: "Bad Header"}, {KeyHeader: "X-Key", Header: http.Header{"X-Key": {"v"}}}} {
		if _, err := bad.Normalize(); err == nil {
			t.Errorf("key header %q with headers %v: no error", bad.KeyHeader, bad.Header)
		}
	}
}
