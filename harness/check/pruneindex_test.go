package check

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// prunesByScan is prunesInPartition as it was written first, a scan of
// every Prune per key: the reference the index must agree with.
func prunesByScan(m models.Config, sp keySpan, kops, prunes []history.Op) []history.Op {
	returns := make([]int64, len(kops))
	calls := make([]int64, len(kops))
	for i, op := range kops {
		returns[i], calls[i] = op.Return, op.Call
	}
	slices.Sort(returns)
	slices.Sort(calls)
	var out []history.Op
	gaps := map[int]int{}
	for _, p := range prunes {
		if p.Output.NotApplied || !sp.prunable(m, p) {
			continue
		}
		before, _ := slices.BinarySearch(returns, p.Call)
		after := len(calls) - upperBound(calls, p.Return)
		if before+after != len(kops) {
			out = append(out, p)
			continue
		}
		if i, ok := gaps[before]; ok {
			if p.Input.Now.After(out[i].Input.Now) {
				out[i] = p
			}
			continue
		}
		gaps[before] = len(out)
		out = append(out, p)
	}
	return out
}

// TestPruneIndexAgreesWithTheScan: on random keys and random Prunes (some
// overlapping the key's operations or one another, several in one gap,
// clocks out of order and equal, Prunes before, between and after the
// key's operations), the index keeps exactly the Prunes, in the order,
// that a scan of every Prune keeps.
func TestPruneIndexAgreesWithTheScan(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := stores.KeyRef{Tenant: "t", Key: "k"}
	r := rand.New(rand.NewSource(7))
	kept, whole := 0, 0
	for trial := range 20000 {
		m := models.Config{LockTTL: time.Second, Retention: time.Duration(r.Intn(30)) * time.Second, Slack: time.Duration(r.Intn(3)) * time.Second}
		var kops, prunes []history.Op
		for i := range 1 + r.Intn(6) {
			call := int64(r.Intn(200))
			kops = append(kops, history.Op{Client: i, Input: models.Input{Kind: models.Begin, Key: k, Fingerprint: "fp", Now: t0.Add(time.Duration(call) * time.Second), ID: i},
				Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: stores.Token(fmt.Sprint(i)), DecidedAt: t0.Add(time.Duration(call) * time.Second)}},
				Call:   call, Return: call + int64(r.Intn(30))})
		}
		for i := range r.Intn(40) {
			call := int64(r.Intn(260)) - 20
			prunes = append(prunes, history.Op{Client: 90 + r.Intn(3), Input: models.Input{Kind: models.Prune, ID: 100 + i, Now: t0.Add(time.Duration(r.Intn(60)) * time.Second)},
				Call: call, Return: call + int64(r.Intn(12))})
		}
		slices.SortStableFunc(prunes, func(a, b history.Op) int { return int(a.Call - b.Call) })
		sp := keySpan{first: kops[0].Call, last: kops[0].Return}
		for _, op := range kops {
			sp.add(op)
		}
		want := prunesByScan(m, sp, kops, prunes)
		got := newPruneIndex(prunes).prunesInPartition(m, sp, kops)
		ids := func(ps []history.Op) []int {
			var out []int
			for _, p := range ps {
				out = append(out, p.Input.ID)
			}
			return out
		}
		if !slices.Equal(ids(got), ids(want)) {
			t.Fatalf("trial %d: the index keeps Prunes %v, the scan %v\nkey %+v\nprunes %+v", trial, ids(got), ids(want), kops, prunes)
		}
		kept += len(want)
		if len(want) > 0 && len(want) < len(prunes)/2 {
			whole++
		}
	}
	if kept < 10000 || whole < 1000 {
		t.Fatalf("%d Prunes kept in all, %d keys that kept under half: the random histories show little", kept, whole)
	}
}
