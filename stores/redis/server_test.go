package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
)

// TestRedis runs every test that needs a server against one Redis server
// for the whole package: IDEM_REDIS_ADDR, or a container that servers.ForTest
// starts and removes (skipped when neither can be had, unless
// IDEM_REQUIRE_SERVERS=1). Each test opens its stores in fresh namespaces.
func TestRedis(t *testing.T) {
	addr := servers.ForTest(t, servers.Redis).Addr
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, addr string)
	}{
		// Sequential: SCRIPT FLUSH empties the cache under the others too.
		{"ScriptCacheLoss", testScriptCacheLoss},
		{"OpenConfigErrors", testOpenConfigErrors},
		{"OpenURL", testOpenURL},
		{"Durability", testDurability},
		// Parallel from here on.
		{"ConcurrentClaim", testConcurrentClaim},
		{"DecisionTable", testDecisionTable},
		{"Release", testRelease},
		{"Takeover", testTakeover},
		{"ConcurrentTakeover", testConcurrentTakeover},
		{"TenantScoping", testTenantScoping},
		{"Keys", testKeys},
		{"RetentionExpiry", testRetentionExpiry},
		{"ContextErrors", testContextErrors},
		{"LostReply", testLostReply},
		{"Mutants", testMutants},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, addr) })
	}
}

// freshNamespace returns a random namespace, so every store has its own keys.
func freshNamespace() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

// open makes a store of the variant in a fresh namespace and deletes its keys
// when the test ends.
func open(t testing.TB, addr, variant string, lockTTL, retention time.Duration) *Store {
	t.Helper()
	return openNS(t, addr, variant, freshNamespace(), lockTTL, retention)
}

func openNS(t testing.TB, addr, variant, ns string, lockTTL, retention time.Duration) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := New(ctx, addr, stores.Config{LockTTL: lockTTL, Retention: retention, Variant: variant, Namespace: ns})
	if err != nil {
		t.Fatalf("open %s: %v", variant, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := s.rdb.Scan(ctx, 0, s.prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			s.rdb.Del(ctx, iter.Val())
		}
		s.Close()
	})
	return s
}
