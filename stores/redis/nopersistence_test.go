package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
)

// TestNoPersistenceVariant: the configuration mutant runs the correct
// scripts, turns the server's persistence off while it is open (so its
// own Durability check reports the danger) and puts the settings back at
// Close. It gets a server of its own: it changes the server's settings.
func TestNoPersistenceVariant(t *testing.T) {
	srv := servers.ForTestOptions(t, servers.Redis, servers.Options{Container: true})
	ctx := context.Background()
	admin := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	defer admin.Close()
	get := func(name string) string {
		m, err := admin.ConfigGet(ctx, name).Result()
		if err != nil {
			t.Fatal(err)
		}
		return m[name]
	}
	if got := get("appendonly"); got != "yes" {
		t.Fatalf("the test server runs with appendonly %q, want yes", got)
	}
	saveBefore := get("save")
	b, err := stores.Lookup("redis")
	if err != nil {
		t.Fatal(err)
	}
	if !b.HasVariant(NoPersistence) {
		t.Fatalf("redis does not register %s", NoPersistence)
	}
	st, err := b.Open(ctx, srv.Addr, stores.Config{LockTTL: time.Second, Retention: time.Hour, Variant: NoPersistence, Namespace: "nop"})
	if err != nil {
		t.Fatal(err)
	}
	s := st.(*Store)
	if _, err := s.Durability(); !errors.Is(err, ErrNotDurable) {
		t.Errorf("Durability() = %v, want ErrNotDurable", err)
	}
	if got, save := get("appendonly"), get("save"); got != "no" || save != "" {
		t.Errorf("while open: appendonly %q, save %q; want no and empty", got, save)
	}
	d, err := s.Begin(ctx, stores.Request{KeyRef: stores.KeyRef{Tenant: "t", Key: "k"}, Fingerprint: "f", Now: time.Now()})
	if err != nil || d.Outcome != stores.Claimed {
		t.Errorf("Begin: %+v, %v: the variant's scripts must be the correct ones", d, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if got, save := get("appendonly"), get("save"); got != "yes" || save != saveBefore {
		t.Errorf("after Close: appendonly %q, save %q; want yes and %q", got, save, saveBefore)
	}
}
