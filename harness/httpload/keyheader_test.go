package httpload_test

import (
	"context"
	"encoding/json"
	"io"
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

// TestKeyInBody: with Request.KeyAt set, every keyed request carries its
// key in the body at that JSON path or form field, and in no header; a
// request sent without a key has no such field; the order is where it
// was.
func TestKeyInBody(t *testing.T) {
	for _, tc := range []struct {
		req  httpload.Request
		read func(r *http.Request) (key, order string)
	}{
		{httpload.Request{KeyAt: "meta.idempotency_key", Body: `{"currency":"EUR","merchant":12345678901234567890}`},
			func(r *http.Request) (string, string) {
				var b struct {
					Meta struct {
						Key string `json:"idempotency_key"`
					} `json:"meta"`
					Order    string          `json:"order"`
					Merchant json.RawMessage `json:"merchant"`
				}
				raw, _ := io.ReadAll(r.Body)
				if err := json.Unmarshal(raw, &b); err != nil || string(b.Merchant) != "12345678901234567890" {
					return "bad body " + string(raw), ""
				}
				return b.Meta.Key, b.Order
			}},
		{httpload.Request{KeyAt: "idempotency_key", BodyType: httpload.BodyForm, Body: "currency=EUR"},
			func(r *http.Request) (string, string) {
				if err := r.ParseForm(); err != nil {
					return "bad form", ""
				}
				return r.PostForm.Get("idempotency_key"), r.PostForm.Get("order")
			}},
	} {
		var mu sync.Mutex
		got := map[string]string{} // the order each key came with
		var inHeader, keyless int
		var bad []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key, order := tc.read(r)
			mu.Lock()
			defer mu.Unlock()
			if r.Header.Get("Idempotency-Key") != "" {
				inHeader++
			}
			switch {
			case order == "":
				bad = append(bad, key)
			case key == "":
				keyless++
			default:
				got[key] = order
			}
			w.WriteHeader(http.StatusOK)
		}))
		h := history.New()
		load, err := httpload.New(httpload.Config{Targets: []httpload.Target{{Name: "i1", URL: srv.URL + "/orders"}}, Clients: 2,
			Duration: 300 * time.Millisecond, Seed: 1, RunID: "kb", MaxKeyLen: stores.MaxKeyLen, Timeout: time.Second, MaxAttempts: 2,
			Mix: httpload.Mix{Missing: 0.3}, Request: tc.req}, h)
		if err != nil {
			t.Fatal(err)
		}
		load.Run(context.Background())
		srv.Close()
		keyed, sentKeyless := 0, 0
		for _, x := range h.Exchanges() {
			if !x.HasKey {
				sentKeyless++
				continue
			}
			keyed++
			if got[x.Key] != x.Order {
				t.Fatalf("%s: key %s was sent with order %s; the service saw it with %q", tc.req.KeyAt, x.Key, x.Order, got[x.Key])
			}
		}
		if keyed == 0 || sentKeyless == 0 || keyless != sentKeyless || inHeader != 0 || len(bad) > 0 {
			t.Errorf("%s: sent %d keyed and %d keyless; the service saw %d keyless, %d with a key header, bad bodies %q", tc.req.KeyAt, keyed, sentKeyless, keyless, inHeader, bad)
		}
	}
}
