package httpcheck

import (
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

// TestOwnerOutlivedItsLease: a second charge of an order seconds after
// the first, whose request was still open and whose instance no fault
// stopped, is a violation (the provider charged twice), and it says that
// the owner may have outlived its own lease: a service slowed by a retry
// storm (its requests queued, its save waiting on a lock) lets its claim
// expire under the owner. Two charges moments apart do not say so: two
// executions each with a lock of its own.
func TestOwnerOutlivedItsLease(t *testing.T) {
	sec := int64(time.Second)
	twice := func(gap int64) Result {
		e := newEv()
		e.x(1, "i2", history.PurposeFirst, "k", "o", "b", 1*sec, 0, 0, "")
		e.charge("o", "i2", 2*sec)
		e.charge("o", "i2", 2*sec+gap)
		e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", 2*sec+gap-sec/100, 2*sec+gap+sec/100, 200, `{"charge":"ch_2"}`)
		return e.result(t, AtMostOnce)
	}
	r := twice(5 * sec)
	wantCause(t, r, CauseConcurrent)
	if d := r.Violations[0].Detail; !strings.Contains(d, "outlived its own lease") || !strings.Contains(d, "ch_2 came 5s after ch_1") {
		t.Errorf("a charge 5 s after its owner's, the owner still open: %s, want the lease named", d)
	}
	r = twice(sec / 100)
	wantCause(t, r, CauseConcurrent)
	if d := r.Violations[0].Detail; strings.Contains(d, "lease") {
		t.Errorf("two charges 10 ms apart: %s, want no lease named", d)
	}
}

// TestRetryTakingOverNamesTheLease: the provider still making the first
// charge when a retry, sent after it began, made the second, 400 ms on
// (a 300 ms lease under a 700 ms charge): the lease is named beside a
// lock not shared, though the charges came less than a second apart.
// The same gap from a request sent before the first began (two first
// requests racing) does not name it.
func TestRetryTakingOverNamesTheLease(t *testing.T) {
	ms := int64(time.Millisecond)
	twice := func(sent int64) Result {
		e := newEv()
		e.x(1, "i1", history.PurposeFirst, "k", "o", "b", 1000*ms, 2200*ms, 200, `{"charge":"ch_1"}`)
		e.chargeOutcome("o", "i1", 1100*ms, 1800*ms, history.OutcomeCharged)
		e.x(2, "i1", history.PurposeRetry, "k", "o", "b", sent, 2000*ms, 200, `{"charge":"ch_2"}`)
		e.chargeOutcome("o", "i1", 1500*ms, 1900*ms, history.OutcomeCharged)
		return e.result(t, AtMostOnce)
	}
	r := twice(1300 * ms)
	wantCause(t, r, CauseConcurrent)
	if d := r.Violations[0].Detail; !strings.Contains(d, "outlived its own lease") || !strings.Contains(d, "ch_2 came 400ms after ch_1") {
		t.Errorf("a retry sent 200 ms into the first charge charged again: %s, want the lease named", d)
	}
	r = twice(1050 * ms)
	wantCause(t, r, CauseConcurrent)
	if d := r.Violations[0].Detail; strings.Contains(d, "lease") {
		t.Errorf("a second request sent before the first charge: %s, want no lease named", d)
	}
}

// TestLeaseExpiredUnderItsOwnerIsNamed: the owner answered just before
// the second charge (after-done), but the request that made the second
// was sent while the provider was still making the first: a lease that
// ran out under its owner is named beside a forgotten key, which alone
// was said of a 300 ms lease under a 300 ms charge.
func TestLeaseExpiredUnderItsOwnerIsNamed(t *testing.T) {
	ms := int64(time.Millisecond)
	e := newEv()
	e.x(1, "i1", history.PurposeFirst, "k", "o", "b", 1000*ms, 1400*ms, 200, `{"charge":"ch_1"}`)
	e.chargeOutcome("o", "i1", 1010*ms, 1390*ms, history.OutcomeCharged)
	e.x(2, "i2", history.PurposeRetry, "k", "o", "b", 1320*ms, 1500*ms, 200, `{"charge":"ch_2"}`)
	e.chargeOutcome("o", "i2", 1401*ms, 1450*ms, history.OutcomeCharged)
	r := e.result(t, AtMostOnce)
	wantCause(t, r, CauseAfterDone)
	if d := r.Violations[0].Detail; !strings.Contains(d, "or a lease: client 2's request on i2") || !strings.Contains(d, "expired under its owner") {
		t.Errorf("a retry sent while the first charge was made charged after its owner answered: %s, want the lease named", d)
	}
}
