package servers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// signalCheckpointer sends sig (STOP, CONT) to the checkpointer of the
// Postgres server nd.
func signalCheckpointer(t *testing.T, nd *node, sig string) {
	t.Helper()
	ctx := context.Background()
	pid, err := pgString(ctx, nd.srv.Addr, `SELECT pid::text FROM pg_stat_activity WHERE backend_type = 'checkpointer'`)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, err := nd.srv.ctr.Exec(ctx, []string{"bash", "-c", "kill -" + sig + " " + pid}); err != nil || code != 0 {
		t.Fatalf("kill -%s %s: exit %d, %v", sig, pid, code, err)
	}
}

// TestSynchronousStandbyWaitsForTheCheckpointer: postgresStreaming
// returns only once commits wait for the standby, which is once the
// checkpointer has reloaded (it sets the flag every commit reads), not
// once a new session sees the standby as synchronous. With the
// checkpointer stopped, a session sees it as sync at once; the function
// must still be waiting, and return once the checkpointer runs; a commit
// then waits for the standby (cut off, it never comes). Without the
// CHECKPOINT, it returned while commits did not wait yet, and the correct
// replicated store's demo lost a done key.
func TestSynchronousStandbyWaitsForTheCheckpointer(t *testing.T) {
	top := TopologyForTest(t, Postgres)
	ctx := context.Background()
	p, sb := top.primary, top.standby
	// Back to no synchronous standby, in force (the checkpointer runs).
	for _, sql := range []string{`ALTER SYSTEM SET synchronous_standby_names = ''`, `SELECT pg_reload_conf()`} {
		if err := pgExec(ctx, p.srv.Addr, sql); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitUntil(ctx, func(ctx context.Context) error {
		if err := pgCheck(ctx, p.srv.Addr, `SELECT current_setting('synchronous_standby_names') = ''`); err != nil {
			return err
		}
		return pgExec(ctx, p.srv.Addr, `CHECKPOINT`)
	}); err != nil {
		t.Fatal(err)
	}

	signalCheckpointer(t, p, "STOP")
	stopped := true
	defer func() {
		if stopped {
			signalCheckpointer(t, p, "CONT")
		}
	}()
	done := make(chan error, 1)
	go func() { done <- postgresStreaming(ctx, p, sb) }()
	if err := waitUntil(ctx, func(ctx context.Context) error {
		return pgCheck(ctx, p.srv.Addr, `SELECT count(*) > 0 FROM pg_stat_replication WHERE sync_state = 'sync'`)
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("postgresStreaming returned (%v) while the checkpointer had not reloaded: commits did not wait for the standby yet", err)
	case <-time.After(time.Second):
	}
	signalCheckpointer(t, p, "CONT")
	stopped = false
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	cutCommitWaits(t, top, p)
}

// cutCommitWaits cuts the standby of top off and fails t if a commit on
// its primary p returns within a second: a synchronous standby is waited
// for, and a cut-off one never answers.
func cutCommitWaits(t *testing.T, top *Topology, p *node) {
	t.Helper()
	if err := top.LagStandby(context.Background()); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := pgExec(cctx, p.srv.Addr, fmt.Sprintf(`CREATE TABLE sync_probe_%d (id int)`, time.Now().UnixNano()%1e9))
	if err == nil {
		t.Errorf("a commit on %s returned while its synchronous standby was cut off", p.name)
	}
}

// TestReadyFinishesAHalfMadeStandby: a standby started after a failover
// whose wait for streaming was cut short (a timeout beside a loaded
// machine, an interrupted round) is not taken as ready: Ready waits for
// it, so the next commits wait for it, and Failover refuses it until
// then. Ready once returned at once for any standby, and the new primary
// (no synchronous standby named in its configuration yet) acknowledged
// commits the standby never had: the correct replicated store lost a done
// key in the demo test.
func TestReadyFinishesAHalfMadeStandby(t *testing.T) {
	top := TopologyForTest(t, Postgres)
	ctx := context.Background()
	if err := top.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	// addStandby's first half only: the standby is the topology's, and
	// nobody waited for it to stream.
	if _, _, err := top.startStandby(ctx); err != nil {
		t.Fatal(err)
	}
	if err := top.Failover(ctx); err == nil || !strings.Contains(err.Error(), "not known to stream") {
		t.Fatalf("Failover to a standby nobody saw stream: %v", err)
	}
	if err := top.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	top.mu.Lock()
	p := top.primary
	top.mu.Unlock()
	cutCommitWaits(t, top, p)
}
