package history

import (
	"strings"
	"testing"
)

// TestJournalReadsBackABlackBoxRun: a black-box run's records read back
// as recorded, and what was in progress when the journal ends reads back
// as lasting to its last time: a request sent and never answered is an
// unanswered exchange, a fault begun and never over lasts to the end, and
// so does a charge the provider never answered; an answered request, a
// fault over and an answered charge count once.
func TestJournalReadsBackABlackBoxRun(t *testing.T) {
	var b journalBuf
	j := NewJournal(&b)
	h, l := New(), NewLedger()
	h.JournalTo(j, "http")
	l.JournalTo(j, "http")

	done := Exchange{Client: 0, Instance: "i1", Purpose: PurposeFirst, Key: "k1", HasKey: true, Order: "o1", Attempt: 1, Call: 10}
	h.Sending(done)
	id := l.Effect("o1", "i1", "", 20)
	l.Answer(id, OutcomeCharged, 30)
	done.Return, done.Status, done.Reply = 40, 201, `{"charge":"`+id+`"}`
	h.AddExchange(done)
	healed := Fault{Client: -1, Kind: FaultInstancePause, Failpoint: "i2", Start: 15}
	h.Faulting(healed)
	healed.End = 35
	h.AddFault(healed)
	h.NoteCrash(Crash{Instance: "i2", At: 36, Status: "exit status 3", Restarted: 38})

	open := Exchange{Client: 1, Instance: "i2", Purpose: PurposeFirst, Key: "k2", HasKey: true, Order: "o2", Attempt: 1, Call: 50}
	h.Sending(open)
	l.Effect("o2", "i2", "", 60)
	h.Faulting(Fault{Client: -1, Kind: FaultInstanceKill, Failpoint: "i2", Start: 70})
	j.Close()

	got, err := ReadJournal(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Scenarios) != 1 {
		t.Fatalf("%d scenarios, want 1", len(got.Scenarios))
	}
	s := got.Scenarios[0]
	xs := s.Hist.Exchanges()
	if len(xs) != 2 || xs[0] != done || s.Unanswered != 1 {
		t.Fatalf("exchanges %+v, %d unanswered: want the answered one as recorded, and the open one", xs, s.Unanswered)
	}
	if x := xs[1]; x.Answered() || x.Return != Never || x.ErrAt != 70 || !strings.Contains(x.Err, "ended before the answer") {
		t.Errorf("the request in flight read back as %+v: want unanswered until the journal's last time (70)", x)
	}
	fs := s.Hist.Faults()
	if len(fs) != 2 || fs[0] != healed || s.Unhealed != 1 {
		t.Fatalf("faults %+v, %d unhealed: want the one over as recorded, and the kill in progress", fs, s.Unhealed)
	}
	if f := fs[1]; f.Kind != FaultInstanceKill || f.Start != 70 || f.End != 70 {
		t.Errorf("the fault in progress read back as %+v: want it to last to the journal's last time", f)
	}
	cs := s.Ledger.Charges()
	if len(cs) != 2 || cs[0].Outcome != OutcomeCharged || cs[0].End != 30 || s.Unfinished != 1 {
		t.Fatalf("charges %+v, %d unfinished", cs, s.Unfinished)
	}
	if c := cs[1]; c.Outcome != "" || c.End != 70 || !c.Effective || c.Via != "i2" {
		t.Errorf("the charge in progress read back as %+v: want it in progress until the journal's last time", c)
	}
	if len(s.Crashes) != 1 || s.Crashes[0].Instance != "i2" || s.Crashes[0].Restarted != 38 {
		t.Errorf("crashes %+v", s.Crashes)
	}
}
