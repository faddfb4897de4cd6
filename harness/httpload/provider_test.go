package httpload_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/httpload"
)

// TestProviderDownstreamKey: the provider answers a repeated downstream
// Idempotency-Key as a real provider does, with no second effect: the
// first charge's id once it was answered, 409 while it is being made,
// 422 for the key with another order; requests without a key are an
// effect each.
func TestProviderDownstreamKey(t *testing.T) {
	h, l := history.New(), history.NewLedger()
	p, err := httpload.StartProvider(httpload.ProviderConfig{Latency: 150 * time.Millisecond, Seed: 1}, h, l, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	charge := func(order, key string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, p.URL("i1"), strings.NewReader(`{"order":"`+order+`"}`))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var c struct {
			Charge string `json:"charge"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&c)
		return resp.StatusCode, c.Charge
	}
	// Two requests of one key at once: one is made, the other refused
	// while it is.
	var wg sync.WaitGroup
	codes := make([]int, 2)
	ids := make([]string, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 1 {
				time.Sleep(50 * time.Millisecond)
			}
			codes[i], ids[i] = charge("o1", "k1")
		}()
	}
	wg.Wait()
	if codes[0] != 200 || ids[0] == "" || codes[1] != http.StatusConflict {
		t.Fatalf("one key at once: %v %v, want 200 with a charge, then 409", codes, ids)
	}
	if code, id := charge("o1", "k1"); code != 200 || id != ids[0] {
		t.Errorf("the key repeated once its charge was answered: %d %q, want 200 %q", code, id, ids[0])
	}
	if code, _ := charge("o2", "k1"); code != http.StatusUnprocessableEntity {
		t.Errorf("the key with another order: %d, want 422", code)
	}
	_, a := charge("o3", "")
	_, b := charge("o3", "")
	if a == b {
		t.Errorf("two requests without a key got one charge %s", a)
	}
	effects := l.EffectiveByOrder()
	if effects["o1"] != 1 || effects["o2"] != 0 || effects["o3"] != 2 {
		t.Errorf("effects by order %v, want o1 once, o2 never, o3 twice", effects)
	}
	repeats := 0
	for _, c := range l.Charges() {
		if !c.Effective {
			repeats++
			if c.Key != "k1" || c.ID != ids[0] {
				t.Errorf("a repeat recorded as %+v, want key k1 and the first charge's id", c)
			}
		}
	}
	if repeats != 3 {
		t.Errorf("%d repeats recorded, want 3", repeats)
	}
}
