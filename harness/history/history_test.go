package history_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// fakeStore answers each call with what the test set.
type fakeStore struct {
	d   stores.Decision
	err error
}

func (f *fakeStore) Begin(context.Context, stores.Request) (stores.Decision, error) {
	return f.d, f.err
}
func (f *fakeStore) Complete(context.Context, stores.KeyRef, stores.Token, stores.Response) error {
	return f.err
}
func (f *fakeStore) Release(context.Context, stores.KeyRef, stores.Token) error { return f.err }
func (f *fakeStore) Prune(context.Context, time.Time) (int, error)              { return 0, f.err }
func (f *fakeStore) Close() error                                               { return nil }

var key = stores.KeyRef{Tenant: "t", Key: "k"}

// TestRecorder: answers are recorded as given, a timeout as an unknown
// outcome (never guessed), a fenced write as definite, and calls that
// never reached the store are left out.
func TestRecorder(t *testing.T) {
	h := history.New()
	f := &fakeStore{d: stores.Decision{Outcome: stores.Claimed, Token: "a"}}
	r := &history.Recorder{Store: f, Client: 3, Hist: h, Clock: faults.RealClock{}}
	ctx := context.Background()
	req := stores.Request{KeyRef: key, Fingerprint: "fp", Now: time.Now()}
	_, _ = r.Begin(ctx, req)
	f.err = fmt.Errorf("%w (%w)", context.DeadlineExceeded, history.ErrPastDeadline)
	_, _ = r.Begin(ctx, req)
	f.err = stores.ErrFenced
	_ = r.Complete(ctx, key, "a", stores.Response{Status: 201})
	f.err = &net.OpError{Op: "dial", Err: errors.New("refused")}
	_ = r.Release(ctx, key, "a")
	f.err = stores.ErrInvalidKey
	_, _ = r.Begin(ctx, req)
	f.err = stores.NotApplied(errors.New("ERROR: could not serialize access (SQLSTATE 40001)"))
	_, _ = r.Begin(ctx, req)
	_ = r.Complete(ctx, key, "a", stores.Response{Status: 201})

	ops := h.Ops()
	if len(ops) != 5 {
		t.Fatalf("%d ops recorded, want 5 (the dial failure and the invalid key left out): %+v", len(ops), ops)
	}
	for _, op := range ops[3:] {
		if !op.Output.NotApplied || op.Output.Unknown || op.Output.Decided() || op.Return == history.Never ||
			op.IsClaim() || op.Accepted(models.Complete) || !strings.Contains(op.Err, "40001") {
			t.Errorf("%s declared not applied: %+v, want a definite no-op that returned, its message kept", op.Input.Kind, op)
		}
	}
	if !ops[0].IsClaim() || ops[0].Client != 3 || ops[0].Return < ops[0].Call {
		t.Errorf("first op %+v, want client 3's claim", ops[0])
	}
	if !ops[1].Output.Unknown || ops[1].Return != history.Never || !strings.Contains(ops[1].Err, "deadline") || ops[1].ErrAt < ops[1].Call || !ops[1].Deadline {
		t.Errorf("timed-out Begin %+v, want an unknown outcome that never returned, past its deadline", ops[1])
	}
	if !ops[2].Output.Fenced || ops[2].Output.Unknown || ops[2].Accepted(models.Complete) {
		t.Errorf("fenced Complete %+v, want a definite fenced answer", ops[2])
	}
	ids := map[int]bool{}
	for _, op := range ops {
		if ids[op.Input.ID] {
			t.Errorf("id %d used twice", op.Input.ID)
		}
		ids[op.Input.ID] = true
	}
}

// sink collects what a worker process's history streams.
type sink struct {
	mu      sync.Mutex
	calls   []int64
	returns []int64
	drops   int
	answers int
}

func (s *sink) Call(seq int64, _ history.Op) {
	s.mu.Lock()
	s.calls = append(s.calls, seq)
	s.mu.Unlock()
}
func (s *sink) Return(seq int64, _ history.Op, drop bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.returns = append(s.returns, seq)
	if drop {
		s.drops++
	}
}
func (s *sink) Work(int, history.WorkRun)        {}
func (s *sink) WorkEnd(int, int64, bool, string) {}
func (s *sink) Fault(history.Fault)              {}
func (s *sink) Answer(history.Answer)            { s.answers++ }

// TestSinkAnnouncesEveryCall: a history with a sink announces each call
// before making it and reports its return (or that it never reached the
// store), so a process killed mid-call leaves the call behind.
func TestSinkAnnouncesEveryCall(t *testing.T) {
	s := &sink{}
	h := history.FromMono(history.New().MonoStart(), s)
	f := &fakeStore{d: stores.Decision{Outcome: stores.InFlight}}
	r := &history.Recorder{Store: f, Client: 1, Hist: h, Clock: faults.RealClock{}}
	_, _ = r.Begin(context.Background(), stores.Request{KeyRef: key, Fingerprint: "fp"})
	f.err = &net.OpError{Op: "dial", Err: errors.New("refused")}
	_, _ = r.Begin(context.Background(), stores.Request{KeyRef: key, Fingerprint: "fp"})
	h.AddAnswer(history.Answer{Client: 1, Key: key})
	if !reflect.DeepEqual(s.calls, []int64{1, 2}) || !reflect.DeepEqual(s.returns, []int64{1, 2}) || s.drops != 1 || s.answers != 1 {
		t.Errorf("sink heard calls %v, returns %v, %d drops, %d answers", s.calls, s.returns, s.drops, s.answers)
	}
	if h.OpCount() != 0 {
		t.Errorf("a streaming history kept %d ops itself", h.OpCount())
	}
}

// TestWriteLoadRoundTrip: a history written as JSON lines loads back the
// same, scenario by scenario, and a line that does not parse is an error
// naming it.
func TestWriteLoadRoundTrip(t *testing.T) {
	mk := func(client int) (*history.History, *history.Ledger) {
		h, l := history.New(), history.NewLedger()
		h.AddOp(history.Op{Client: client, Input: models.Input{Kind: models.Begin, Key: key, Fingerprint: "fp", ID: 1},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "a", Fence: 3, // fields a store may give
				DecidedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), LeaseUntil: time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)}}, Call: 1, Return: 2})
		h.AddOp(history.Op{Client: client, Input: models.Input{Kind: models.Complete, Key: key, Token: "a", ID: 2},
			Output: models.Output{Unknown: true}, Call: 3, Return: history.Never, Err: "timeout"})
		i := h.AddWork(history.WorkRun{Client: client, Key: key, Order: "o1", Token: "a", Start: 2, End: history.Never})
		h.EndWorkAt(i, 5, false, "ch_1")
		h.AddFault(history.Fault{Client: client, Key: key, Kind: history.FaultPause, Failpoint: "run.after-claim", Start: 2, End: 4})
		h.AddAnswer(history.Answer{Client: client, Key: key, Order: "o1", Status: 201, At: 6})
		l.Charge("o1", "charge:o1", client, 4)
		l.Charge("o1", "charge:o1", client, 5)
		return h, l
	}
	var buf bytes.Buffer
	h1, l1 := mk(1)
	h2, l2 := mk(2)
	if err := history.Write(&buf, "race", h1, l1); err != nil {
		t.Fatal(err)
	}
	if err := history.Write(&buf, "crash", h2, l2); err != nil {
		t.Fatal(err)
	}
	saved, err := history.Load(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(saved) != 2 || saved[0].Scenario != "race" || saved[1].Scenario != "crash" {
		t.Fatalf("loaded %+v", saved)
	}
	got := saved[1]
	if !reflect.DeepEqual(got.Hist.Ops(), h2.Ops()) || !reflect.DeepEqual(got.Hist.Work(), h2.Work()) ||
		!reflect.DeepEqual(got.Hist.Faults(), h2.Faults()) || !reflect.DeepEqual(got.Hist.Answers(), h2.Answers()) ||
		!reflect.DeepEqual(got.Ledger.Charges(), l2.Charges()) {
		t.Errorf("round trip changed the history")
	}
	if next := got.Ledger.Charge("o2", "", 1, 9); next != "ch_2" {
		t.Errorf("a loaded ledger's next charge is %s, want ch_2", next)
	}
	if _, err := history.Load(strings.NewReader("{\"scenario\":\"x\",\"type\":\"op\",\"op\":{}}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a bad line: %v, want an error naming line 2", err)
	}
	// A line repeated (an edited or damaged file): a charge made once
	// was judged made twice, a FAIL the run never had. A repeat of a
	// downstream key, not effective, carries its charge's ID again.
	var one bytes.Buffer
	if err := history.Write(&one, "race", h1, l1); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(one.String(), "\n")
	for _, kind := range []string{`"type":"op"`, `"type":"charge"`} {
		for i, l := range lines {
			if strings.Contains(l, kind) && (kind != `"type":"charge"` || strings.Contains(l, `"effective":true`)) {
				doubled := strings.Join(slices.Insert(slices.Clone(lines), i, l), "")
				if _, err := history.Load(strings.NewReader(doubled)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("line %d repeats", i+2)) {
					t.Errorf("line %d (%s) repeated: %v, want it refused by its number", i+1, kind, err)
				}
				break
			}
		}
	}
}

// TestOpsIsSortedAndStable: Ops gives the calls in call order (ties in the
// order recorded), every reader gets the same shared slice, and a slice
// already returned never changes when later calls are recorded, even
// calls that sort before it.
func TestOpsIsSortedAndStable(t *testing.T) {
	h := history.New()
	add := func(id int, call int64) {
		h.AddOp(history.Op{Client: id, Input: models.Input{ID: id, Kind: models.Begin}, Call: call, Return: call + 1})
	}
	calls := func(ops []history.Op) []int {
		var out []int
		for _, op := range ops {
			out = append(out, op.Input.ID)
		}
		return out
	}
	add(1, 30)
	add(2, 10)
	add(3, 30)
	add(4, 20)
	first := h.Ops()
	if got, want := calls(first), []int{2, 4, 1, 3}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ops %v, want %v (call order, ties as recorded)", got, want)
	}
	if again := h.Ops(); &again[0] != &first[0] {
		t.Error("a second reader got a copy, not the shared slice")
	}
	add(5, 5) // sorts first
	add(6, 40)
	if got := calls(first); !reflect.DeepEqual(got, []int{2, 4, 1, 3}) {
		t.Errorf("a slice already returned changed to %v", got)
	}
	if got, want := calls(h.Ops()), []int{5, 2, 4, 1, 3, 6}; !reflect.DeepEqual(got, want) {
		t.Errorf("ops %v, want %v", got, want)
	}
	if h.OpCount() != 6 {
		t.Errorf("OpCount %d, want 6", h.OpCount())
	}
}

// TestHasSince: HasSince sees only the calls recorded after its mark, and
// every call once Ops has sorted them since (their places moved).
func TestHasSince(t *testing.T) {
	h := history.New()
	h.AddOp(history.Op{Client: 1, Call: 10, Return: 11})
	m := h.Mark()
	h.AddOp(history.Op{Client: 2, Call: 5, Return: 12}) // out of call order: Ops will sort
	is := func(c int) func(history.Op) bool { return func(op history.Op) bool { return op.Client == c } }
	if h.HasSince(m, is(1)) || !h.HasSince(m, is(2)) {
		t.Fatal("before a sort: want only the call recorded after the mark")
	}
	h.Ops()
	if !h.HasSince(m, is(1)) || !h.HasSince(m, is(2)) {
		t.Fatal("after a sort: want every call")
	}
}

// TestRecorderMarksOnlyTheCallersDeadline: a call is recorded as timed
// out (Op.Deadline) only when its error says the caller's deadline passed
// (history.ErrPastDeadline, as workload.WithDeadline marks it); a store's
// own timeout is an error it answered. A call declared not applied past
// the caller's deadline is marked too: a correct Postgres store whose
// pool had no session free in time failed --strict-availability so.
func TestRecorderMarksOnlyTheCallersDeadline(t *testing.T) {
	h := history.New()
	f := &fakeStore{}
	r := &history.Recorder{Store: f, Client: 1, Hist: h, Clock: faults.RealClock{}}
	req := stores.Request{KeyRef: key, Fingerprint: "fp", Now: time.Now()}
	f.err = fmt.Errorf("waited for the row lock: %w", context.DeadlineExceeded)
	_, _ = r.Begin(context.Background(), req)
	f.err = fmt.Errorf("read tcp: i/o timeout (%w)", history.ErrPastDeadline)
	_, _ = r.Begin(context.Background(), req)
	// Declared not applied because no pool session came free before the
	// caller's deadline: timed out too, and still a definite no-op.
	f.err = stores.NotApplied(fmt.Errorf("no session came free: %w (%w)", context.DeadlineExceeded, history.ErrPastDeadline))
	_, _ = r.Begin(context.Background(), req)
	ops := h.Ops()
	if len(ops) != 3 || ops[0].Deadline || !ops[1].Deadline || !ops[0].Output.Unknown || !ops[1].Output.Unknown {
		t.Fatalf("ops %+v: want the store's own timeout unmarked, the caller's marked, both of unknown outcome", ops)
	}
	if !ops[2].Deadline || !ops[2].Output.NotApplied || ops[2].Output.Unknown {
		t.Fatalf("op %+v: want a no-op declared past the caller's deadline marked as timed out", ops[2])
	}
}

// monoClock reads time.Now() as Go gives it, with its monotonic reading.
type monoClock struct{}

func (monoClock) Now() time.Time { return time.Now() }

// givenStore keeps every time a store call was given.
type givenStore struct {
	fakeStore
	given []time.Time
}

func (g *givenStore) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	g.given = append(g.given, req.Now)
	return g.fakeStore.Begin(ctx, req)
}
func (g *givenStore) Prune(ctx context.Context, now time.Time) (int, error) {
	g.given = append(g.given, now)
	return g.fakeStore.Prune(ctx, now)
}
func (g *givenStore) Extend(_ context.Context, _ stores.KeyRef, _ stores.Token, now time.Time) error {
	g.given = append(g.given, now)
	return nil
}

// hasMonotonic reports whether t carries Go's monotonic clock reading.
func hasMonotonic(t time.Time) bool { return t != t.Round(0) }

// TestRecorderKeepsWallReadings: whatever its clock and its callers give,
// the Recorder gives a store, and records, wall readings alone
// (faults.Wall), and a Begin's or Prune's recorded time is the one the
// store was given. A time with a monotonic reading is measured by that
// clock in memory and by the wall clock once saved, so a run was judged
// by other intervals than its store measured and its re-check.
func TestRecorderKeepsWallReadings(t *testing.T) {
	if !hasMonotonic(time.Now()) || hasMonotonic(faults.RealClock{}.Now()) || hasMonotonic(faults.NewManualClock(time.Now()).Now()) {
		t.Fatal("want time.Now() with a monotonic reading, and the harness's clocks without")
	}
	h := history.New()
	g := &givenStore{fakeStore: fakeStore{d: stores.Decision{Outcome: stores.Claimed, Token: "a"}}}
	r := &history.Recorder{Store: g, Client: 1, Hist: h, Clock: monoClock{}}
	ctx := context.Background()
	_, _ = r.Begin(ctx, stores.Request{KeyRef: key, Fingerprint: "fp", Now: time.Now()})
	_ = r.Extend(ctx, key, "a", time.Now())
	_ = r.Complete(ctx, key, "a", stores.Response{Status: 201})
	_ = r.Release(ctx, key, "a")
	_, _ = r.Prune(ctx, time.Now().Add(-time.Hour))
	for i, at := range g.given {
		if hasMonotonic(at) {
			t.Errorf("store call %d was given %v, with a monotonic reading", i, at)
		}
	}
	ops := h.Ops()
	if len(ops) != 5 || len(g.given) != 3 {
		t.Fatalf("%d ops recorded, %d times given; want 5 and 3", len(ops), len(g.given))
	}
	for _, op := range ops {
		for _, at := range []time.Time{op.Input.Now, op.Input.Sent, op.Input.Called} {
			if hasMonotonic(at) {
				t.Errorf("%s recorded %v, with a monotonic reading", op.Input.Kind, at)
			}
		}
	}
	if ops[0].Input.Now != g.given[0] || ops[4].Input.Now.Before(g.given[2]) {
		t.Errorf("Begin recorded %v, given %v; Prune recorded %v, given %v", ops[0].Input.Now, g.given[0], ops[4].Input.Now, g.given[2])
	}
}

// TestTakenOver: a key is taken over once a Begin on it was answered
// Claimed as a takeover, and only then; a claim that is not a takeover,
// or a takeover on another key, does not count, and a history that moved
// its calls to disk still knows.
func TestTakenOver(t *testing.T) {
	other := stores.KeyRef{Tenant: key.Tenant, Key: key.Key + "-other"}
	claim := func(k stores.KeyRef, takeover bool, call int64) history.Op {
		return history.Op{Client: 1, Input: models.Input{Kind: models.Begin, Key: k, Fingerprint: "fp"},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "t", Takeover: takeover}}, Call: call, Return: call + 1}
	}
	h := history.New()
	if err := h.SpillTo(t.TempDir(), 1024); err != nil {
		t.Fatal(err)
	}
	h.AddOp(claim(key, false, 1))
	h.AddOp(claim(other, true, 3))
	if h.TakenOver(key) {
		t.Errorf("a key claimed afresh, never taken over, reads as taken over")
	}
	if !h.TakenOver(other) {
		t.Errorf("a key a Begin took over reads as not taken over")
	}
	h.AddOp(claim(key, true, 5))
	for i := int64(0); i < 4096; i++ {
		h.AddOp(claim(other, false, 7+2*i)) // pushes the takeover out to disk
	}
	if h.Has(func(op history.Op) bool { return op.Input.Key == key }) {
		t.Fatalf("the takeover's call is still in memory: the test needs it moved to disk")
	}
	if !h.TakenOver(key) {
		t.Errorf("a key taken over, its call since moved to disk, reads as not taken over")
	}
}
