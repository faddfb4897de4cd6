package check_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/models"
)

// TestLeakProbeNeedsAPruneThatAnswered: a key still there when probed past
// its retention is a leak only if a Prune that answered ran once it was
// past it. A correct store on a full disk, every Prune failing, was
// failed under strict retention ("still there past its retention and a
// prune"); its probes are now not judged, and the detail says why.
func TestLeakProbeNeedsAPruneThatAnswered(t *testing.T) {
	run := func(prune models.Output, pruneAt int64) check.Result {
		r := happy()
		at := int64(model.Retention/time.Millisecond) + 20000 // ms, as rec's times
		r.op(0, models.Input{Kind: models.Prune, Now: t0.Add(time.Duration(pruneAt) * time.Millisecond)}, prune, pruneAt, pruneAt+1)
		r.begin(leakProbe, "leak", at+2, at+3, inFlightD)
		r.begin(probe, "fp", at+10, at+11, replayD(resp)) // a call after the leak probe changes nothing
		lp := leakProbe
		for _, res := range check.Run(check.Evidence{Hist: r.h, Ledger: r.l, Model: model, ProbeClient: probe, LeakProbe: &lp, StrictRetention: true, LinTimeout: time.Second}) {
			if res.Checker == check.Retention {
				return res
			}
		}
		t.Fatal("no retention result")
		return check.Result{}
	}
	late := int64(model.Retention/time.Millisecond) + 20000
	if r := run(models.Output{}, late); r.Verdict != check.Fail {
		t.Errorf("a key kept past a Prune that answered: %s: %s", r.Verdict, r.Detail)
	}
	for name, c := range map[string]struct {
		out models.Output
		at  int64
	}{
		"the Prune failed":          {models.Output{Unknown: true}, late},
		"the Prune was not applied": {models.Output{NotApplied: true}, late},
		"the Prune came too early":  {models.Output{}, int64(model.Retention/time.Millisecond) / 2},
	} {
		r := run(c.out, c.at)
		if r.Verdict != check.Pass || r.Judged != 0 || !strings.Contains(r.Detail, "1 leak probe(s) not judged") {
			t.Errorf("%s: %s (judged %d): %s", name, r.Verdict, r.Judged, r.Detail)
		}
	}
}
