package history_test

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// record records the same calls, answers, work and faults into h: keys
// keys, a Prune every 97 calls, calls returning out of call order.
func record(h *history.History, calls, keys int) {
	base := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	for i := range calls {
		k := stores.KeyRef{Tenant: "t", Key: fmt.Sprintf("order-%d", i%keys)}
		in := models.Input{Kind: models.Begin, Key: k, Fingerprint: "fp", ID: i + 1, Now: base.Add(time.Duration(i) * time.Millisecond)}
		out := models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: stores.Token(fmt.Sprint("tok-", i)), DecidedAt: in.Now}}
		if i%97 == 0 {
			in = models.Input{Kind: models.Prune, ID: i + 1, Now: in.Now}
			out = models.Output{}
		}
		call := int64(i*10 + (i%3)*25) // returns out of call order now and then
		h.AddOp(history.Op{Client: i % 7, Input: in, Output: out, Call: call, Return: call + 5})
		if i%5 == 0 {
			h.AddAnswer(history.Answer{Client: i % 7, Key: k, Order: k.Key, Fingerprint: "fp", Status: 200, Attempts: 1, At: call + 6})
		}
		if i%11 == 0 {
			w := h.AddWork(history.WorkRun{Client: i % 7, Key: k, Order: k.Key, Token: stores.Token(fmt.Sprint("tok-", i)), Start: call + 6})
			h.EndWorkAt(w, call+8, false, "")
		}
	}
	h.AddFault(history.Fault{Kind: history.FaultStall, Start: 10, End: 20})
}

// TestSpillKeepsEveryRecord: a history that moved its calls and answers
// to disk gives back the same calls in the same order, the same answers,
// and parts that hold each key's calls in exactly one part with every
// Prune in each, in a file a part; its history.jsonl loads back to the
// same calls.
func TestSpillKeepsEveryRecord(t *testing.T) {
	const calls, keys = 8000, 300
	whole := history.New()
	record(whole, calls, keys)
	h := history.New()
	dir := t.TempDir() + "/spill"
	if err := h.SpillTo(dir, 1024); err != nil {
		t.Fatal(err)
	}
	record(h, calls, keys)
	if !h.Spilled() {
		t.Fatal("8,000 calls with 1,024 kept did not spill")
	}
	if !reflect.DeepEqual(whole.Ops(), h.Ops()) {
		t.Fatal("a spilled history's Ops differ from the same history held in memory")
	}
	sortAnswers := func(as []history.Answer) []history.Answer {
		slices.SortFunc(as, func(a, b history.Answer) int { return int(a.At - b.At) })
		return as
	}
	if !reflect.DeepEqual(sortAnswers(whole.Answers()), sortAnswers(h.Answers())) {
		t.Fatal("a spilled history's Answers differ")
	}

	prunes := 0
	for _, op := range whole.Ops() {
		if op.Input.Kind == models.Prune {
			prunes++
		}
	}
	partOf := map[stores.KeyRef]int{}
	n, parts, answers, work := 0, 0, 0, 0
	err := h.EachPart(func(p *history.History) error {
		ps := 0
		ops := p.Ops()
		for i, op := range ops {
			if i > 0 && op.Call < ops[i-1].Call {
				t.Fatalf("part %d: calls out of call order", parts)
			}
			if op.Input.Kind == models.Prune {
				ps++
				continue
			}
			if q, ok := partOf[op.Input.Key]; ok && q != parts {
				t.Fatalf("key %s in parts %d and %d", op.Input.Key, q, parts)
			}
			partOf[op.Input.Key] = parts
			n++
		}
		if ps != prunes {
			t.Fatalf("part %d holds %d Prunes, want every one (%d)", parts, ps, prunes)
		}
		for _, a := range p.Answers() {
			if partOf[a.Key] != parts {
				t.Fatalf("answer of %s in part %d, its calls in %d", a.Key, parts, partOf[a.Key])
			}
			answers++
		}
		for _, w := range p.Work() {
			if partOf[w.Key] != parts {
				t.Fatalf("work of %s in part %d, its calls in %d", w.Key, parts, partOf[w.Key])
			}
			work++
		}
		if len(p.Faults()) != 1 {
			t.Fatalf("part %d holds %d faults, want the run's one", parts, len(p.Faults()))
		}
		parts++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if parts != history.SpillParts || n != calls-prunes || len(partOf) != keys || answers != len(whole.Answers()) || work != len(whole.Work()) {
		t.Fatalf("parts %d, keyed calls %d of %d, keys %d of %d, answers %d of %d, work %d of %d",
			parts, n, calls-prunes, len(partOf), keys, answers, len(whole.Answers()), work, len(whole.Work()))
	}

	var buf bytes.Buffer
	if err := history.Write(&buf, "s", h, nil); err != nil {
		t.Fatal(err)
	}
	saved, err := history.Load(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(saved[0].Hist.Ops(), whole.Ops()) {
		t.Fatal("the history.jsonl of a spilled history loads back to other calls")
	}
	loadDir := t.TempDir() + "/load"
	spilledBack, err := history.LoadSpilled(strings.NewReader(buf.String()), loadDir, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if !spilledBack[0].Hist.Spilled() || !reflect.DeepEqual(spilledBack[0].Hist.Ops(), whole.Ops()) ||
		!reflect.DeepEqual(sortAnswers(spilledBack[0].Hist.Answers()), sortAnswers(whole.Answers())) {
		t.Fatalf("LoadSpilled: spilled %v, or its calls or answers differ", spilledBack[0].Hist.Spilled())
	}
	if _, err := os.Stat(loadDir + "/0"); err != nil {
		t.Fatalf("LoadSpilled spilled nothing to its folder: %v", err)
	}
	if files, err := os.ReadDir(dir); err != nil || len(files) != history.SpillParts {
		t.Fatalf("%s holds %d files, want a file a part (%v)", dir, len(files), err)
	}
}

// TestSpillStillScansWhatItHolds: Has and HasSince find calls still in
// memory after older ones moved to disk.
func TestSpillStillScansWhatItHolds(t *testing.T) {
	h := history.New()
	if err := h.SpillTo(t.TempDir(), 1024); err != nil {
		t.Fatal(err)
	}
	record(h, 5000, 10)
	m := h.Mark()
	k := stores.KeyRef{Tenant: "t", Key: "late"}
	h.AddOp(history.Op{Input: models.Input{Kind: models.Begin, Key: k, ID: 99999}, Call: 1 << 40, Return: 1<<40 + 1})
	is := func(op history.Op) bool { return op.Input.Key == k }
	if !h.Has(is) || !h.HasSince(m, is) {
		t.Fatal("a call recorded after the spill is not found")
	}
	if h.HasSince(h.Mark(), is) {
		t.Fatal("HasSince found a call recorded before its mark")
	}
}
