package httpload_test

import (
	"context"
	"fmt"
	"hash/crc32"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/httpload"
	"github.com/idemcheck/idemcheck/stores"
)

// TestProbesReadBackContestedKeys: a settled key two of whose requests
// may have been in the service at once (a race request beside its
// first, or an attempt with no definite answer before the next) is read
// back once after the load, as a replay, so that an answer saved over it
// by an owner that lost its claim is seen; a key answered at its first
// attempt with nothing beside it is not. The owner's own answer may have
// been lost: a save over the key's answer showed to no request.
func TestProbesReadBackContestedKeys(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		if key == "" || len(key) > stores.MaxKeyLen {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		again := seen[key]
		seen[key] = true
		mu.Unlock()
		if !again && crc32.ChecksumIEEE([]byte(key))%2 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable) // its next attempt goes
			return
		}
		fmt.Fprintf(w, `{"charge":"ch_%s"}`, key)
	}))
	defer srv.Close()
	h := history.New()
	load, err := httpload.New(httpload.Config{Targets: []httpload.Target{{Name: "i1", URL: srv.URL + "/orders"}}, Clients: 4,
		Duration: 300 * time.Millisecond, Seed: 1, RunID: "readback", MaxKeyLen: stores.MaxKeyLen, Timeout: time.Second, MaxAttempts: 3}, h)
	if err != nil {
		t.Fatal(err)
	}
	load.Run(context.Background())
	loaded := len(h.Exchanges())
	load.Probe(context.Background(), 5*time.Second)
	contested, readBack, probed := map[string]bool{}, map[string]int{}, map[string]bool{}
	for i, x := range h.Exchanges() {
		switch {
		case i >= loaded && x.Client == -1 && x.Purpose == history.PurposeReplay:
			readBack[x.Key]++
		case i >= loaded && x.Purpose == history.PurposeProbe:
			probed[x.Key] = true // not settled when the load ended
		case i >= loaded:
			t.Errorf("after the load: %+v", x)
		case x.Purpose == history.PurposeRace || x.Purpose != history.PurposeReuse && x.Attempt > 1:
			contested[x.Key] = true
		}
	}
	for k := range probed {
		delete(contested, k)
	}
	if len(contested) == 0 || len(contested) == len(seen) {
		t.Fatalf("%d of %d keys contested: too few to tell", len(contested), len(seen))
	}
	for k := range contested {
		if readBack[k] != 1 {
			t.Errorf("contested key %s read back %d times, want once", k, readBack[k])
		}
	}
	for k, n := range readBack {
		if !contested[k] {
			t.Errorf("key %s, never contested, read back %d times", k, n)
		}
	}
}
