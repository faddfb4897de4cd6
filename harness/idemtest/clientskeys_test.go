package idemtest_test

import (
	"context"
	"testing"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// TestFactoryClientsAndKeys: a store's author who wants more contention
// than the suite's defaults had no way to ask for it; Factory.Clients and
// Factory.Keys set the scenarios' clients and keys.
func TestFactoryClientsAndKeys(t *testing.T) {
	t.Setenv("IDEM_RESULTS", t.TempDir())
	f := idemtest.Factory{Name: "memory-16-20", Clock: stores.CallerClock, WaitsAnnounced: true, Clients: 16, Keys: 20,
		Open: func(cfg stores.Config) (stores.Store, error) { return memory.New(cfg) }}
	sum, _, err := idemtest.CheckScenario(context.Background(), f, "race")
	if err != nil {
		t.Fatal(err)
	}
	if sum.Verdict != check.Pass || sum.Clients != 16 || sum.Keys != 20 {
		t.Errorf("verdict %s, %d clients, %d keys: want a pass with 16 clients on 20 keys", sum.Verdict, sum.Clients, sum.Keys)
	}
}
