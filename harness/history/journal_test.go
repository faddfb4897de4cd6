package history

import (
	"bytes"
	"context"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

type journalBuf struct{ bytes.Buffer }

func (*journalBuf) Close() error { return nil }

// fixedStore answers every Begin with a claim, and blocks in Complete
// until release is closed (a call in flight when the process dies).
type fixedStore struct {
	stores.Store
	release chan struct{}
}

func (fixedStore) Begin(context.Context, stores.Request) (stores.Decision, error) {
	return stores.Decision{Outcome: stores.Claimed, Token: "tok"}, nil
}

func (f fixedStore) Complete(context.Context, stores.KeyRef, stores.Token, stores.Response) error {
	<-f.release
	return nil
}

// TestJournalReadsBack: what a journal holds reads back as the history
// recorded it; a call announced and never returned reads back of unknown
// outcome, a work run never ended ends at the last recorded time, a torn
// last line is left out, and a broken line before it ends the journal
// there.
func TestJournalReadsBack(t *testing.T) {
	var b journalBuf
	j := NewJournal(&b)
	h, l := New(), NewLedger()
	h.JournalTo(j, "s")
	l.JournalTo(j, "s")
	j.Note("", "run", map[string]int{"n": 1})
	st := fixedStore{release: make(chan struct{})}
	r := &Recorder{Store: st, Client: 1, Hist: h, Clock: faults.RealClock{}}
	key := stores.KeyRef{Tenant: "t", Key: "k"}
	if _, err := r.Begin(context.Background(), stores.Request{KeyRef: key, Fingerprint: "f"}); err != nil {
		t.Fatal(err)
	}
	h.AddWork(WorkRun{Client: 1, Key: key, Order: "o", Token: "tok", Start: h.Now(), End: Never})
	l.Charge("o", "", 1, h.Now())
	h.AddAnswer(Answer{Client: 1, Key: key, Order: "o", Status: 201})
	done := make(chan struct{})
	go func() { r.Complete(context.Background(), key, "tok", stores.Response{Status: 201}); close(done) }()
	for !strings.Contains(journalText(j, &b), `"type":"call","seq":2`) {
		time.Sleep(time.Millisecond) // the Complete is announced, then blocks
	}
	got, err := ReadJournal(strings.NewReader(journalText(j, &b)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Scenarios) != 1 || got.Notes["run"] == nil || got.Torn {
		t.Fatalf("read %d scenarios, run note %s, torn %v", len(got.Scenarios), got.Notes["run"], got.Torn)
	}
	s := got.Scenarios[0]
	ops := s.Hist.Ops()
	if len(ops) != 2 || !ops[0].IsClaim() || ops[1].Input.Kind != models.Complete || !ops[1].Output.Unknown || ops[1].Return != Never || s.InFlight != 1 {
		t.Errorf("ops %+v, in flight %d: want the claim and the Complete in flight, unknown", ops, s.InFlight)
	}
	if ws := s.Hist.Work(); len(ws) != 1 || ws[0].End == Never || ws[0].End < ws[0].Start || s.Unended != 1 {
		t.Errorf("work %+v: want it ended at the last recorded time", ws)
	}
	if len(s.Ledger.Charges()) != 1 || len(s.Hist.Answers()) != 1 {
		t.Errorf("%d charges, %d answers", len(s.Ledger.Charges()), len(s.Hist.Answers()))
	}
	close(st.release)
	<-done
	j.Close()

	full := b.Bytes()
	torn, err := ReadJournal(bytes.NewReader(full[:len(full)-3]))
	if err != nil || !torn.Torn {
		t.Errorf("a torn last line: torn %v, err %v", torn != nil && torn.Torn, err)
	}
	// A line broken before the last (a write a full disk cut short, then
	// more lines once it was freed): read up to it, as if the run had
	// died there, the lines after it dropped, never an error that loses
	// the run (recheck refused it with exit 2).
	broken := bytes.Replace(full, []byte(`"type":"answer"`), []byte(`"type":"answer`), 1)
	lineNo := bytes.Count(full[:bytes.Index(full, []byte(`"type":"answer"`))], []byte("\n")) + 1
	got, err = ReadJournal(bytes.NewReader(broken))
	if err != nil || got.Unreadable != lineNo || got.Dropped == 0 || !got.Torn {
		t.Fatalf("a broken line %d: %+v, %v; want it read up to that line, the rest dropped", lineNo, got, err)
	}
	if n := len(got.Scenarios[0].Hist.Answers()); n != 0 {
		t.Errorf("%d answers read past the broken line", n)
	}
}

// journalText is what j has written to b so far.
func journalText(j *Journal, b *journalBuf) string {
	j.flush()
	j.mu.Lock()
	defer j.mu.Unlock()
	return b.String()
}

// TestJournalCutNeverShowsAnAnswerWithoutItsCause: A's claim is
// announced, B's Begin is announced and answered 409 (it saw A's claim),
// and only then A's answer comes back, all between two of the journal's
// writes. Cut at every byte, the journal never holds B's 409 without A's
// call: A's line (its "call", as another's answer was queued after it was
// announced) comes first. Queued at its return, A's one line came after
// B's, and a recovered cut failed a correct store's race (409 with no
// claim).
func TestJournalCutNeverShowsAnAnswerWithoutItsCause(t *testing.T) {
	var b journalBuf
	j := NewJournal(&b)
	h := New()
	h.JournalTo(j, "s")
	key := stores.KeyRef{Tenant: "t", Key: "k"}
	a := Op{Client: 1, Input: models.Input{Kind: models.Begin, Key: key, Fingerprint: "f", ID: 1}, Call: 10}
	bop := Op{Client: 2, Input: models.Input{Kind: models.Begin, Key: key, Fingerprint: "f", ID: 2}, Call: 20}
	seqA := h.call(a)
	seqB := h.call(bop)
	bop.Output, bop.Return = models.Output{Decision: stores.Decision{Outcome: stores.InFlight}}, 30
	h.ret(seqB, bop, false)
	a.Output, a.Return = models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "tok"}}, 40
	h.ret(seqA, a, false)
	j.Close()
	full := b.Bytes()
	saw409 := false
	for cut := range len(full) + 1 {
		got, err := ReadJournal(bytes.NewReader(full[:cut]))
		if err != nil || len(got.Scenarios) == 0 {
			continue
		}
		var hasA, hasB bool
		for _, op := range got.Scenarios[0].Hist.Ops() {
			hasA = hasA || op.Client == 1
			hasB = hasB || op.Client == 2 && op.Output.Decided()
		}
		if hasB && !hasA {
			t.Fatalf("cut at %d of %d: B's 409 without A's claim\n%s", cut, len(full), full[:cut])
		}
		saw409 = saw409 || hasB
	}
	if !saw409 {
		t.Fatal("no cut held B's answer: the test judges nothing")
	}
}

// TestJournalReadsBackSpilled: a journal of thousands of calls read back
// spilling past 1,024 (what Recover does, for a killed run of millions)
// gives the calls and answers ReadJournal gives, from disk.
func TestJournalReadsBackSpilled(t *testing.T) {
	var b journalBuf
	j := NewJournal(&b)
	h := New()
	h.JournalTo(j, "s")
	for i := range 5000 {
		key := stores.KeyRef{Tenant: "t", Key: strconv.Itoa(i % 97)}
		h.AddOp(Op{Client: i % 5, Input: models.Input{Kind: models.Begin, Key: key, Fingerprint: "f", ID: i + 1},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.InFlight}}, Call: int64(i), Return: int64(i + 3)})
		if i%4 == 0 {
			h.AddAnswer(Answer{Client: i % 5, Key: key, Order: key.Key, Status: 409, At: int64(i + 4)})
		}
	}
	j.Close()
	whole, err := ReadJournal(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	spilled, err := ReadJournalSpilled(bytes.NewReader(b.Bytes()), t.TempDir(), 1024)
	if err != nil {
		t.Fatal(err)
	}
	w, s := whole.Scenarios[0].Hist, spilled.Scenarios[0].Hist
	if !s.Spilled() || len(s.Ops()) != 5000 || !reflect.DeepEqual(s.Ops(), w.Ops()) || len(s.Answers()) != len(w.Answers()) {
		t.Fatalf("spilled %v: %d calls and %d answers read back, want 5000 and %d, the same", s.Spilled(), len(s.Ops()), len(s.Answers()), len(w.Answers()))
	}
}
