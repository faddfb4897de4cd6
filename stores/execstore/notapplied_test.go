package execstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/execstore"
)

// refusingSaves is a store whose every Complete its database refused as a
// whole: a definite no-op (stores.ErrNotApplied).
type refusingSaves struct{ stores.Store }

func (refusingSaves) Complete(context.Context, stores.KeyRef, stores.Token, stores.Response) error {
	return stores.NotApplied(errors.New("could not serialize access due to concurrent update (SQLSTATE 40001)"))
}

// TestNotAppliedCode: a store's not-applied error crosses the protocol
// (code not-applied) as stores.ErrNotApplied, its message kept, and the
// refused save changed nothing.
func TestNotAppliedCode(t *testing.T) {
	ctx := context.Background()
	c, err := execstore.Probe(ctx, line("refusing"), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Open(ctx, "", stores.Config{LockTTL: time.Hour, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k := stores.KeyRef{Tenant: "t", Key: "k"}
	d, err := st.Begin(ctx, stores.Request{KeyRef: k, Fingerprint: "f", Now: time.Now()})
	if err != nil || d.Outcome != stores.Claimed {
		t.Fatalf("Begin: %+v, %v", d, err)
	}
	err = st.Complete(ctx, k, d.Token, stores.Response{Status: 201})
	if !errors.Is(err, stores.ErrNotApplied) || !strings.Contains(err.Error(), "40001") {
		t.Fatalf("refused Complete: %v, want ErrNotApplied with the store's message", err)
	}
	if n := strings.Count(err.Error(), stores.ErrNotApplied.Error()); n != 1 {
		t.Errorf("refused Complete: %v: says it was not applied %d times, want once", err, n)
	}
	if d, err := st.Begin(ctx, stores.Request{KeyRef: k, Fingerprint: "f", Now: time.Now()}); err != nil || d.Outcome != stores.InFlight {
		t.Errorf("Begin after the refused save: %+v, %v, want in flight", d, err)
	}
}
