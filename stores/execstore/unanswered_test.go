package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/execstore"
)

// muteSave is a store whose thread for a save dies without an answer,
// as a Python worker thread does on an exception nobody catches: a
// complete is never answered, and the process lives on. A release first
// hits its failpoint "held", waits for the go, then is fenced.
func muteSave() {
	serveLines(`{"type":"hello","protocol":1,"name":"mute","clock":"caller","points":["held"]}`, func(m map[string]any, id int64) {
		switch m["type"] {
		case "complete":
			fmt.Fprintln(os.Stderr, "Exception in thread Thread-7: KeyError: 'response'")
		case "release":
			fmt.Printf(`{"type":"hit","id":%d,"point":"held"}`+"\n", id)
		case "go":
			fmt.Printf(`{"type":"error","id":%d,"code":"fenced","message":"no such claim"}`+"\n", id)
		default:
			fmt.Printf(`{"type":"ok","id":%d}`+"\n", id)
		}
	})
}

// TestUnansweredRequestIsCut: a request the store never answers ends,
// after the Command's bound, in an error wrapping stores.ErrUnanswered
// that quotes the store's stderr (an unknown outcome); a scenario with
// no call deadline of its own waited on it for as long as it was let.
// A request held at a failpoint by the caller's handler (the scheduler)
// longer than the bound is not cut: the store is not holding it.
func TestUnansweredRequestIsCut(t *testing.T) {
	ctx := context.Background()
	c, err := execstore.Probe(ctx, line("mute-save"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Long enough that the store's hit comes back well within it on a
	// loaded machine (at load 46, 300 ms did not).
	const bound = 1500 * time.Millisecond
	c.Unanswered = bound
	st, err := c.Open(ctx, "", stores.Config{LockTTL: time.Second, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k := stores.KeyRef{Tenant: "t", Key: "k"}
	t0 := time.Now()
	err = st.Complete(ctx, k, "tok", stores.Response{Status: 201, Body: "x"})
	if !errors.Is(err, stores.ErrUnanswered) || !strings.Contains(err.Error(), "KeyError: 'response'") {
		t.Fatalf("a save the store never answers: %v, want stores.ErrUnanswered with the store's stderr", err)
	}
	if took := time.Since(t0); took < bound {
		t.Fatalf("cut after %v, before the bound %v", took, bound)
	}
	held := faults.WithHandler(ctx, faults.HandlerFunc(func(context.Context, string) error {
		time.Sleep(2 * bound) // let go as the bound runs out again: the store then has a bound of its own
		return nil
	}))
	if err := st.Release(held, k, "tok"); !errors.Is(err, stores.ErrFenced) {
		t.Fatalf("a release held by the caller's handler past the bound: %v, want its answer (fenced)", err)
	}
}
