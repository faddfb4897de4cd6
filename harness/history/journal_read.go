package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/idemcheck/idemcheck/models"
)

// Journaled is one scenario's records read back from a journal.
type Journaled struct {
	Scenario string
	Hist     *History
	Ledger   *Ledger
	// Notes are the harness's own lines about the scenario (Journal.Note),
	// by kind: the last of each.
	Notes map[string]json.RawMessage
	// InFlight counts the store calls announced and never returned: read
	// back as of unknown outcome. Unended counts the work runs with no
	// end, closed at the scenario's last recorded time.
	InFlight, Unended int
	// InFlightPrune reports whether one of the calls in flight was a
	// Prune: it may have run at any time up to the crash, by a clock the
	// journal never saw.
	InFlightPrune bool
	// Unanswered counts the HTTP requests sent (History.Sending) and never
	// answered: read back as requests with no answer, ended at the
	// journal's last time. Unhealed counts the faults begun
	// (History.Faulting) and never ended, and Unfinished the provider's
	// charges never answered (Ledger.Effect): both last to that time.
	Unanswered, Unhealed, Unfinished int
	// Crashes are a black-box run's instances that exited by themselves
	// (History.NoteCrash).
	Crashes []Crash
	// Announced reports whether calls were announced for another process
	// (History.Announce): a worker's call reaches the harness through a
	// pipe, so the journal's order is not the order the calls were made
	// in, and a cut journal may hold an answer without the call that
	// caused it.
	Announced bool
}

// JournalRead is what ReadJournal found.
type JournalRead struct {
	// Notes are the run's own lines (Journal.Note with no scenario).
	Notes map[string]json.RawMessage
	// Scenarios in order of first appearance.
	Scenarios []*Journaled
	// Torn reports that the last line was cut short (the process died
	// while writing it): it is left out.
	Torn bool
	// Unreadable is the first line that was not whole JSON before the
	// last (0: none): a write the disk cut short (full, then freed), or
	// damage. The journal is read up to it, as if the run had died
	// there, and the Dropped lines after it are left out: a line lost
	// from the middle (a work run's end, a fault) could make a correct
	// run read as a violation, where a journal cut short cannot.
	Unreadable, Dropped int
	// Lines counts the lines read.
	Lines int
}

// Unread says where the journal was read to when a line before its last
// was not whole (Unreadable), for a report's account of how the run
// ended; "" when none was.
func (j *JournalRead) Unread() string {
	if j.Unreadable == 0 {
		return ""
	}
	return fmt.Sprintf(" (read up to its line %d, which is not whole: the %d line(s) after it were left out, as if the run had died there)", j.Unreadable, j.Dropped)
}

// journalLine is one line of a journal, as ReadJournal decodes it.
type journalLine struct {
	Scenario string          `json:"scenario"`
	Type     string          `json:"type"`
	Seq      int64           `json:"seq"`
	Drop     bool            `json:"drop"`
	Op       *Op             `json:"op"`
	Work     *WorkRun        `json:"work"`
	End      *workEnd        `json:"end"`
	Fault    *Fault          `json:"fault"`
	Answer   *Answer         `json:"answer"`
	Charge   *Charge         `json:"charge"`
	Exchange *Exchange       `json:"exchange"`
	Crash    *Crash          `json:"crash"`
	Data     json.RawMessage `json:"data"`
}

// ReadJournal reads a journal back, one History and Ledger per scenario.
// Calls announced and never returned are of unknown outcome (Return =
// Never), as when a worker process dies; work runs never ended end at the
// scenario's last recorded time, the latest the journal shows them
// running. So do a black-box run's faults begun and never over and the
// provider's charges never answered, and its HTTP requests sent and
// never answered read back unanswered, their error at that time. A last line cut short is left out (Torn); any other line that
// does not parse is an error naming it: nothing is silently skipped.
func ReadJournal(r io.Reader) (*JournalRead, error) {
	return readJournal(r, func(int) *History { return &History{} })
}

// ReadJournalSpilled is ReadJournal for the journal of a run of millions
// of calls: each scenario's history spills past keep calls and answers,
// the i'th to dir/<i> (see LoadSpilled), so that recovering it holds a
// part at a time. Remove dir once the histories are no longer read.
func ReadJournalSpilled(r io.Reader, dir string, keep int) (*JournalRead, error) {
	fresh, err := spilling(dir, keep)
	if err != nil {
		return nil, err
	}
	return readJournal(r, fresh)
}

// sentKey names an HTTP request in flight: a client sends one at a time.
type sentKey struct {
	client int
	call   int64
}

// readJournal is ReadJournal with each scenario's history made by fresh
// (given its index).
func readJournal(r io.Reader, fresh func(int) *History) (*JournalRead, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	out := &JournalRead{Notes: map[string]json.RawMessage{}}
	type parts struct {
		j       *Journaled
		pending map[int64]Op
		order   []int64
		ended   map[int]bool
		charges []Charge
		last    int64
		// sent are the HTTP requests sent and not yet answered, by
		// client and call time (a client sends one at a time); open the
		// faults begun and not yet over; effects the provider's charges
		// not yet answered, by their index in charges.
		sent    map[sentKey]Exchange
		sentOrd []sentKey
		open    map[Fault]bool
		openOrd []Fault
		effects map[string]int
	}
	index := map[string]*parts{}
	get := func(name string) *parts {
		p, ok := index[name]
		if !ok {
			p = &parts{j: &Journaled{Scenario: name, Hist: fresh(len(out.Scenarios)), Notes: map[string]json.RawMessage{}},
				pending: map[int64]Op{}, ended: map[int]bool{}, sent: map[sentKey]Exchange{}, open: map[Fault]bool{},
				effects: map[string]int{}}
			index[name] = p
			out.Scenarios = append(out.Scenarios, p.j)
		}
		return p
	}
	seen := func(p *parts, ts ...int64) {
		for _, t := range ts {
			if t != Never && t > p.last {
				p.last = t
			}
		}
	}
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			if len(bytes.TrimSpace(line)) > 0 {
				out.Torn = true // written up to the crash, never ended
			}
			break
		}
		if err != nil {
			return nil, fmt.Errorf("journal line %d: %v", n, err)
		}
		out.Lines = n
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var l journalLine
		if err := json.Unmarshal(line, &l); err != nil {
			out.Unreadable, out.Torn = n, true
			for {
				rest, err := br.ReadBytes('\n')
				if len(bytes.TrimSpace(rest)) > 0 {
					out.Dropped++
				}
				if err != nil {
					break
				}
			}
			break
		}
		if l.Data != nil {
			if l.Scenario == "" {
				out.Notes[l.Type] = l.Data
			} else {
				get(l.Scenario).j.Notes[l.Type] = l.Data
			}
			continue
		}
		p := get(l.Scenario)
		h := p.j.Hist
		switch {
		case (l.Type == "call" || l.Type == "announce") && l.Op != nil:
			p.pending[l.Seq] = *l.Op
			p.order = append(p.order, l.Seq)
			p.j.Announced = p.j.Announced || l.Type == "announce"
			seen(p, l.Op.Call)
		case l.Type == "ret" && l.Op != nil:
			delete(p.pending, l.Seq)
			if !l.Drop {
				h.push(*l.Op)
				h.nextID = max(h.nextID, l.Op.Input.ID)
			}
			seen(p, l.Op.Call, l.Op.Return, l.Op.ErrAt)
		case l.Type == "op" && l.Op != nil:
			h.push(*l.Op)
			h.nextID = max(h.nextID, l.Op.Input.ID)
			seen(p, l.Op.Call, l.Op.Return, l.Op.ErrAt)
		case l.Type == "work" && l.Work != nil:
			if int(l.Seq) != len(h.work) {
				return nil, fmt.Errorf("journal line %d: work run %d of %s out of order (expected %d)", n, l.Seq, l.Scenario, len(h.work))
			}
			h.work = append(h.work, *l.Work)
			seen(p, l.Work.Start)
		case l.Type == "work_end" && l.End != nil:
			if l.Seq < 0 || int(l.Seq) >= len(h.work) {
				return nil, fmt.Errorf("journal line %d: the end of work run %d of %s, which never started", n, l.Seq, l.Scenario)
			}
			w := &h.work[l.Seq]
			w.End, w.Failed, w.ChargeID = l.End.End, l.End.Failed, l.End.ChargeID
			p.ended[int(l.Seq)] = true
			seen(p, l.End.End)
		case l.Type == "fault" && l.Fault != nil:
			begun := *l.Fault
			begun.End = 0
			delete(p.open, begun)
			h.faults = append(h.faults, *l.Fault)
			seen(p, l.Fault.Start, l.Fault.End)
		case l.Type == "answer" && l.Answer != nil:
			h.addAnswer(*l.Answer)
			seen(p, l.Answer.At)
		case l.Type == "charge" && l.Charge != nil:
			p.charges = append(p.charges, *l.Charge)
			seen(p, l.Charge.At)
		case l.Type == "effect" && l.Charge != nil:
			p.effects[l.Charge.ID] = len(p.charges)
			p.charges = append(p.charges, *l.Charge)
			seen(p, l.Charge.At)
		case l.Type == "effect_end" && l.Charge != nil:
			i, ok := p.effects[l.Charge.ID]
			if !ok {
				return nil, fmt.Errorf("journal line %d: the answer to charge %s of %s, which was never made", n, l.Charge.ID, l.Scenario)
			}
			delete(p.effects, l.Charge.ID)
			p.charges[i] = *l.Charge
			seen(p, l.Charge.At, l.Charge.End)
		case l.Type == "sending" && l.Exchange != nil:
			k := sentKey{l.Exchange.Client, l.Exchange.Call}
			p.sent[k] = *l.Exchange
			p.sentOrd = append(p.sentOrd, k)
			seen(p, l.Exchange.Call)
		case l.Type == "exchange" && l.Exchange != nil:
			delete(p.sent, sentKey{l.Exchange.Client, l.Exchange.Call})
			h.exchanges = append(h.exchanges, *l.Exchange)
			seen(p, l.Exchange.Call, l.Exchange.Return, l.Exchange.ErrAt)
		case l.Type == "fault_start" && l.Fault != nil:
			p.open[*l.Fault] = true
			p.openOrd = append(p.openOrd, *l.Fault)
			seen(p, l.Fault.Start)
		case l.Type == "crash" && l.Crash != nil:
			p.j.Crashes = append(p.j.Crashes, *l.Crash)
			seen(p, l.Crash.At, l.Crash.Restarted)
		default:
			return nil, fmt.Errorf("journal line %d: unknown record type %q", n, l.Type)
		}
	}
	for _, j := range out.Scenarios {
		p := index[j.Scenario]
		for _, seq := range p.order {
			op, ok := p.pending[seq]
			if !ok {
				continue
			}
			op.Output, op.Return, op.ErrAt = models.Output{Unknown: true}, Never, 0
			op.Err = "the run's process ended before the call returned"
			j.Hist.push(op)
			j.Hist.nextID = max(j.Hist.nextID, op.Input.ID)
			j.InFlight++
			j.InFlightPrune = j.InFlightPrune || op.Input.Kind == models.Prune
		}
		for i := range j.Hist.work {
			if !p.ended[i] {
				j.Hist.work[i].End = max(p.last, j.Hist.work[i].Start)
				j.Unended++
			}
		}
		for _, k := range p.sentOrd {
			x, ok := p.sent[k]
			if !ok {
				continue
			}
			delete(p.sent, k) // a key sent twice (it cannot be) counts once
			x.Return, x.ErrAt = Never, max(p.last, x.Call)
			x.Err = "the run's process ended before the answer came"
			j.Hist.exchanges = append(j.Hist.exchanges, x)
			j.Unanswered++
		}
		for _, f := range p.openOrd {
			if !p.open[f] {
				continue
			}
			delete(p.open, f)
			f.End = max(p.last, f.Start)
			j.Hist.faults = append(j.Hist.faults, f)
			j.Unhealed++
		}
		for _, i := range p.effects {
			p.charges[i].End = max(p.last, p.charges[i].At)
			j.Unfinished++
		}
		j.Ledger = LedgerOf(p.charges)
	}
	return out, nil
}
