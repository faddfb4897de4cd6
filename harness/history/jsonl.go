package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/idemcheck/idemcheck/models"
)

// Line is one line of history.jsonl: one record of one scenario's history.
type Line struct {
	Scenario string    `json:"scenario"`
	Type     string    `json:"type"` // op | work | fault | answer | charge | exchange
	Op       *Op       `json:"op,omitempty"`
	Work     *WorkRun  `json:"work,omitempty"`
	Fault    *Fault    `json:"fault,omitempty"`
	Answer   *Answer   `json:"answer,omitempty"`
	Charge   *Charge   `json:"charge,omitempty"`
	Exchange *Exchange `json:"exchange,omitempty"`
}

// Write writes one scenario's history and ledger as JSON lines: the ops
// in call order and the answers, then work, faults, HTTP exchanges and
// charges. A spilled history ([History.SpillTo]) is written part by part
// ([History.EachPart]), each part's ops in call order, so that writing it
// holds one part at once; Load reads either back.
func Write(w io.Writer, scenario string, h *History, l *Ledger) error {
	enc := json.NewEncoder(w)
	var b []byte
	first := true
	err := h.EachPart(func(p *History) error {
		for _, op := range p.Ops() {
			if op.Input.Kind == models.Prune && !first {
				continue // every part holds every Prune: written with the first
			}
			var ok bool
			if b, ok = appendOpLine(b[:0], scenario, &op); ok {
				if _, err := w.Write(b); err != nil {
					return err
				}
			} else if err := enc.Encode(Line{Scenario: scenario, Type: "op", Op: &op}); err != nil {
				return err
			}
		}
		first = false
		for _, a := range p.Answers() {
			b = appendAnswerLine(b[:0], scenario, &a)
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, wr := range h.Work() {
		b = append(appendWork(appendLineHead(b[:0], scenario, "work"), &wr), "}\n"...)
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	for _, f := range h.Faults() {
		if err := enc.Encode(Line{Scenario: scenario, Type: "fault", Fault: &f}); err != nil {
			return err
		}
	}
	for _, x := range h.Exchanges() {
		if err := enc.Encode(Line{Scenario: scenario, Type: "exchange", Exchange: &x}); err != nil {
			return err
		}
	}
	if l != nil {
		for _, c := range l.Charges() {
			b = append(appendCharge(appendLineHead(b[:0], scenario, "charge"), &c), "}\n"...)
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// Saved is one scenario's history loaded back from history.jsonl.
type Saved struct {
	Scenario string
	Hist     *History
	Ledger   *Ledger
}

// Load reads a history.jsonl written by Write (one or more scenarios) and
// returns each scenario's history and ledger in order of first
// appearance. A line that does not parse is an error naming its number:
// nothing is silently skipped.
func Load(r io.Reader) ([]Saved, error) {
	return load(r, func(int) *History { return &History{} })
}

// LoadSpilled is Load for a history.jsonl of millions of calls: each
// scenario's history spills past keep calls and answers, the i'th (in
// order of first appearance) to dir/<i> ([History.SpillTo]), so that
// loading and judging it (part by part) hold at most about keep of them
// in memory. Remove dir once the histories are no longer read.
func LoadSpilled(r io.Reader, dir string, keep int) ([]Saved, error) {
	fresh, err := spilling(dir, keep)
	if err != nil {
		return nil, err
	}
	return load(r, fresh)
}

// load is Load with each scenario's history made by fresh (given its
// index).
func load(r io.Reader, fresh func(int) *History) ([]Saved, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	type parts struct {
		h       *History
		charges []Charge
		// Every call's ID and effective charge's ID once: a line repeated (an
		// edited or damaged file) judged a charge made once as made
		// twice, a FAIL the run never had. IDs are dense from 1: a bit
		// each, however many millions.
		opIDs     []uint64
		chargeIDs map[string]bool
	}
	index := map[string]int{}
	var names []string
	var all []*parts
	get := func(name string) *parts {
		i, ok := index[name]
		if !ok {
			i = len(all)
			index[name] = i
			names = append(names, name)
			all = append(all, &parts{h: fresh(i)})
		}
		return all[i]
	}
	n := 0
	for sc.Scan() {
		n++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var l Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			if !sc.Scan() && sc.Err() == nil {
				// The last line: the file ends inside it (a copy cut
				// short, a disk that filled).
				return nil, fmt.Errorf("history line %d is cut short (the file ends inside it: %v): the file is not the whole run's", n, err)
			}
			return nil, fmt.Errorf("history line %d: %v", n, err)
		}
		p := get(l.Scenario)
		switch {
		case l.Type == "op" && l.Op != nil:
			if id := l.Op.Input.ID; id > 0 {
				w := id / 64
				if w >= len(p.opIDs) {
					p.opIDs = append(p.opIDs, make([]uint64, w-len(p.opIDs)+1)...)
				}
				if p.opIDs[w]&(1<<(id%64)) != 0 {
					return nil, fmt.Errorf("history line %d repeats call %d of scenario %s (its ID is on an earlier line): the file was edited or damaged", n, id, l.Scenario)
				}
				p.opIDs[w] |= 1 << (id % 64)
			}
			p.h.push(*l.Op)
			p.h.nextID = max(p.h.nextID, l.Op.Input.ID)
		case l.Type == "work" && l.Work != nil:
			p.h.work = append(p.h.work, *l.Work)
		case l.Type == "fault" && l.Fault != nil:
			p.h.faults = append(p.h.faults, *l.Fault)
		case l.Type == "answer" && l.Answer != nil:
			p.h.addAnswer(*l.Answer)
		case l.Type == "exchange" && l.Exchange != nil:
			p.h.exchanges = append(p.h.exchanges, *l.Exchange)
		case l.Type == "charge" && l.Charge != nil:
			// A repeat of a downstream key answers its charge's ID
			// again, not effective: an effective one is made once.
			if id := l.Charge.ID; id != "" && l.Charge.Effective {
				if p.chargeIDs == nil {
					p.chargeIDs = map[string]bool{}
				}
				if p.chargeIDs[id] {
					return nil, fmt.Errorf("history line %d repeats charge %s of scenario %s (its ID is on an earlier line): the file was edited or damaged", n, id, l.Scenario)
				}
				p.chargeIDs[id] = true
			}
			p.charges = append(p.charges, *l.Charge)
		default:
			return nil, fmt.Errorf("history line %d: unknown record type %q", n, l.Type)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("history line %d: %v", n+1, err)
	}
	out := make([]Saved, len(all))
	for i, p := range all {
		out[i] = Saved{Scenario: names[i], Hist: p.h, Ledger: LedgerOf(p.charges)}
	}
	return out, nil
}
