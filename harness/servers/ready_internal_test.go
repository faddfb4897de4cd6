package servers

import (
	"context"
	"testing"
	"time"
)

// TestReadyWaitsForASlowServer: a server that needs longer than Ready's
// first ping to answer one (a restarted Postgres recovering on a starved
// machine, beside the load's connection attempts) is still found ready,
// since each ping that runs out of time gets twice as long. With every
// ping cut at readyPing, chaos beside two CPU-spinning processes waited
// for such a server for 400 s.
func TestReadyWaitsForASlowServer(t *testing.T) {
	// Not parallel: it adds a kind to the package's table, and takes it
	// out, before the parallel tests run.
	const slow = Kind("slow-to-answer")
	const answerAfter = readyPing + readyPing/4
	kinds[slow] = kindFacts{ping: func(ctx context.Context, _ string) error {
		select {
		case <-time.After(answerAfter):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	defer delete(kinds, slow)
	f := &Faults{srv: &Server{Kind: slow}}
	// A bound no load reaches: with every ping cut at readyPing, Ready
	// never sees an answer however long it is given.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.Ready(ctx); err != nil {
		t.Fatalf("Ready on a server that answers a ping in %v: %v", answerAfter, err)
	}
}
