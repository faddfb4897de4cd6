package idemtest_test

import (
	"context"
	"fmt"
	"os"

	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// Example checks a store from outside a test: the race scenario on the
// in-memory reference store. In a test, call idemtest.Run(t, factory) to
// get the model test and every scenario as subtests.
func Example() {
	factory := idemtest.Factory{
		Name:  "memory",
		Clock: stores.CallerClock, // staleness judged by the caller's clock
		Open: func(cfg stores.Config) (stores.Store, error) {
			s, err := memory.New(cfg) // a fresh, empty store per call
			if err != nil {
				return nil, err
			}
			return s, nil
		},
	}
	sum, dir, err := idemtest.CheckScenario(context.Background(), factory, "race")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	s := sum.Scenarios[0]
	fmt.Printf("%s: %s on %d keys\n", s.Name, s.Verdict, s.Keys)
	for _, c := range s.Checkers {
		fmt.Printf("  %s: %s\n", c.Checker, c.Verdict)
	}
	// Output:
	// race: pass on 8 keys
	//   at-most-once: pass
	//   exclusive-execution: pass
	//   fencing: pass
	//   replay-fidelity: pass
	//   mismatch: pass
	//   linearizability: pass
	//   liveness: pass
	//   retention: pass
	//   availability: pass
}
