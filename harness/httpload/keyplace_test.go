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

// TestKeyPlace: every keyed request carries its key where the request
// says (a header of the service's own, Request.KeyHeader; or the body,
// at a JSON path or form field, Request.KeyAt) and nowhere else, with its
// order where it was, and a request sent without a key carries none, as
// a service that reads its key there sees them over a real connection.
func TestKeyPlace(t *testing.T) {
	// jsonBody reads a JSON body's order and key (a template's number
	// must go out as written).
	jsonBody := func(r *http.Request) (order, key string, ok bool) {
		var b struct {
			Meta struct {
				Key string `json:"idempotency_key"`
			} `json:"meta"`
			Order    string          `json:"order"`
			Merchant json.RawMessage `json:"merchant"`
		}
		raw, _ := io.ReadAll(r.Body)
		err := json.Unmarshal(raw, &b)
		return b.Order, b.Meta.Key, err == nil && (b.Merchant == nil || string(b.Merchant) == "12345678901234567890")
	}
	for _, tc := range []struct {
		req httpload.Request
		// read says the request's order and key as the service reads
		// them, and whether its body was well formed.
		read func(r *http.Request) (order, key string, ok bool)
	}{
		{httpload.Request{KeyHeader: "x-request-key"}, func(r *http.Request) (string, string, bool) {
			order, _, ok := jsonBody(r)
			return order, r.Header.Get("X-Request-Key"), ok
		}},
		{httpload.Request{KeyAt: "meta.idempotency_key", Body: `{"currency":"EUR","merchant":12345678901234567890}`}, jsonBody},
		{httpload.Request{KeyAt: "idempotency_key", BodyType: httpload.BodyForm, Body: "currency=EUR"},
			func(r *http.Request) (string, string, bool) {
				err := r.ParseForm()
				return r.PostForm.Get("order"), r.PostForm.Get("idempotency_key"), err == nil
			}},
	} {
		name := tc.req.KeyHeader + tc.req.KeyAt
		var mu sync.Mutex
		got := map[string]string{} // the order each key came with
		var inDefault, keyless int
		var bad []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			order, key, ok := tc.read(r)
			mu.Lock()
			defer mu.Unlock()
			if r.Header.Get("Idempotency-Key") != "" {
				inDefault++
			}
			switch {
			case !ok || order == "":
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
			Duration: 300 * time.Millisecond, Seed: 1, RunID: "kp", MaxKeyLen: stores.MaxKeyLen, Timeout: time.Second, MaxAttempts: 2,
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
				t.Fatalf("%s: key %s was sent with order %s; the service saw it with %q", name, x.Key, x.Order, got[x.Key])
			}
		}
		if keyed == 0 || sentKeyless == 0 || keyless != sentKeyless || inDefault != 0 || len(bad) > 0 {
			t.Errorf("%s: sent %d keyed and %d keyless; the service saw %d keyless, %d with Idempotency-Key, bad bodies %q",
				name, keyed, sentKeyless, keyless, inDefault, bad)
		}
	}
}
