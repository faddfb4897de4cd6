package scenario

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// notesOf runs scenario name on st (keys orders, clients clients, seed
// 1) and returns its notes (Env.NotTested), one per line: what it meant
// to test and did not.
func notesOf(t *testing.T, name string, st stores.Store, cfg stores.Config, clients, keys int) string {
	t.Helper()
	sc, ok := Lookup(name)
	if !ok {
		t.Fatalf("no %s scenario", name)
	}
	env := NewEnv(Setup{Name: name, Store: st, Config: cfg, Clients: clients, Keys: keys, Seed: 1, RandSeed: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sc.Run(ctx, env)
	return strings.Join(env.Record().NotTested, "\n")
}

// wantNote fails t unless notes say what (a note that begins with it) of
// every one of keys orders when missed, and nothing at all otherwise.
func wantNote(t *testing.T, notes, what string, keys int, missed bool) {
	t.Helper()
	t.Logf("missed %v: notes %q", missed, notes)
	every := fmt.Sprintf(": %d of %d orders", keys, keys)
	switch {
	case missed && (!strings.HasPrefix(notes, what) || !strings.Contains(notes, every)):
		t.Errorf("nothing was tested on any order, but the notes say %q; want %q…%q", notes, what, every)
	case !missed && notes != "":
		t.Errorf("everything was tested, but the notes say %q", notes)
	}
}
