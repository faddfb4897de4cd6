package history

import (
	"bufio"
	"cmp"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// SpillParts is how many parts a spilled history is cut into by key
// (SpillTo): a part is read back whole, so the largest part, about
// 1/SpillParts of the run, bounds what checking holds at once.
const SpillParts = 64

// spill is where a History puts the calls and answers it no longer holds
// in memory: one file per part, each key's records all in one part.
type spill struct {
	dir   string
	keep  int // calls (and answers) held in memory before older ones move out
	parts []*spillPart
	moved int // calls moved out, in recording order: the first moved of every call
	// answered: some answers moved out.
	answered bool
	err      error
}

// spilled reports whether some calls or answers moved to disk (h.mu
// held).
func (h *History) spilled() bool {
	return h.spill != nil && (h.spill.moved > 0 || h.spill.answered)
}

// spillPart is one part's file, written as a gob stream of spillRec.
type spillPart struct {
	f   *os.File
	w   *bufio.Writer
	enc *gob.Encoder
}

// spillRec is one record of a part's file: a call or an answer.
type spillRec struct {
	Op     *Op
	Answer *Answer
}

// SpillTo makes the history hold at most about keep store calls and keep
// answers in memory: past that, the oldest go to files in dir (created
// when the first record moves), cut into [SpillParts] parts by key. A
// run of millions of calls then holds its calls on disk, not in memory,
// and is checked part by part ([History.EachPart]). Prunes, which have
// no key, are kept in memory (every part needs them), as are work runs
// and faults (few). Has and HasSince see only the calls still in memory
// (TakenOver sees every call): a scenario that waits on them for an event
// of its run waits out its bound instead when the event has moved to
// disk. Remove
// dir once nothing reads the history.
func (h *History) SpillTo(dir string, keep int) error {
	s, err := newSpill(dir, keep)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.spill = s
	return nil
}

// newSpill is where a history spills past keep calls: dir.
func newSpill(dir string, keep int) (*spill, error) {
	if keep < opChunk {
		return nil, fmt.Errorf("history: keep %d calls in memory at least (%d)", keep, opChunk)
	}
	return &spill{dir: dir, keep: keep}, nil
}

// open creates the folder and the parts' files, the first time a record
// moves out: a history that never grows past keep leaves nothing on disk.
func (s *spill) open() error {
	if s.parts != nil || s.err != nil {
		return s.err
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		s.err = err
		return err
	}
	for i := range SpillParts {
		f, err := os.Create(filepath.Join(s.dir, fmt.Sprintf("part-%02d.gob", i)))
		if err != nil {
			s.close()
			s.err = err
			return err
		}
		w := bufio.NewWriterSize(f, 32<<10)
		s.parts = append(s.parts, &spillPart{f: f, w: w, enc: gob.NewEncoder(w)})
	}
	return nil
}

// Spilled reports whether the history moved calls or answers to disk
// (SpillTo): then Ops and Answers read every part back, and a reader that
// must stay within memory goes part by part ([History.EachPart]).
func (h *History) Spilled() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.spilled()
}

// close closes the parts' files (open failed half way).
func (s *spill) close() {
	for _, p := range s.parts {
		_ = p.f.Close()
	}
}

// partOf is the part of key k: a hash of the key, the same in every
// process.
func partOf(k stores.KeyRef) int {
	f := fnv.New32a()
	_, _ = io.WriteString(f, k.Tenant)
	_, _ = f.Write([]byte{0})
	_, _ = io.WriteString(f, k.Key)
	return int(f.Sum32() % SpillParts)
}

// spillCalls moves the oldest calls out of memory while more than keep
// (and a chunk) are held (h.mu held): the array Ops last joined first,
// then whole chunks. Prunes stay, in h.prunes.
func (h *History) spillCalls() {
	s := h.spill
	for s.err == nil && h.nops-s.moved > s.keep+opChunk {
		if s.open() != nil {
			return
		}
		var out []Op
		if len(h.ops) > 0 {
			out, h.ops = h.ops, nil
		} else if len(h.chunks) > 1 {
			out, h.chunks = h.chunks[0], h.chunks[1:]
		} else {
			return
		}
		for i := range out {
			op := &out[i]
			if op.Input.Kind == models.Prune {
				h.prunes = append(h.prunes, *op)
				continue
			}
			if err := s.parts[partOf(op.Input.Key)].enc.Encode(spillRec{Op: op}); err != nil {
				s.err = err
			}
		}
		s.moved += len(out)
	}
}

// spillAnswers moves the answers out of memory once more than keep are
// held (h.mu held).
func (h *History) spillAnswers() {
	s := h.spill
	if s.err != nil || len(h.answers) <= s.keep || s.open() != nil {
		return
	}
	for i := range h.answers {
		a := &h.answers[i]
		if err := s.parts[partOf(a.Key)].enc.Encode(spillRec{Answer: a}); err != nil {
			s.err = err
		}
	}
	h.answers = h.answers[:0]
	s.answered = true
}

// errSpill wraps what went wrong writing or reading a spilled history.
var errSpill = errors.New("spilled history")

// sizes are the lengths of the parts' files (h.mu held; the writers
// flushed): a reader reads that far, so that what is written while it
// reads (a final probe's calls) is never read half-written.
func (s *spill) sizes() ([]int64, error) {
	out := make([]int64, len(s.parts))
	for i, p := range s.parts {
		st, err := p.f.Stat()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errSpill, err)
		}
		out[i] = st.Size()
	}
	return out, nil
}

// readPart reads the first size bytes of part i back.
func (s *spill) readPart(i int, size int64) (ops []Op, answers []Answer, err error) {
	f, err := os.Open(s.parts[i].f.Name())
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errSpill, err)
	}
	defer f.Close()
	dec := gob.NewDecoder(bufio.NewReaderSize(io.LimitReader(f, size), 64<<10))
	for {
		var r spillRec
		if err := dec.Decode(&r); err == io.EOF {
			return ops, answers, nil
		} else if err != nil {
			return nil, nil, fmt.Errorf("%w: part %d: %v", errSpill, i, err)
		}
		switch {
		case r.Op != nil:
			ops = append(ops, *r.Op)
		case r.Answer != nil:
			answers = append(answers, *r.Answer)
		}
	}
}

// flush writes out what the parts' writers hold (h.mu held).
func (s *spill) flush() error {
	if s.err != nil {
		return fmt.Errorf("%w: %v", errSpill, s.err)
	}
	for _, p := range s.parts {
		if err := p.w.Flush(); err != nil {
			s.err = err
			return fmt.Errorf("%w: %v", errSpill, err)
		}
	}
	return nil
}

// EachPart calls f with the history cut into parts, one at a time: each
// part a History of its own holding every call and answer of some keys
// (each key in exactly one part, its calls in call order), with every
// Prune, fault and the work runs of its keys. A history that did not
// spill is one part: itself. A checker that must stay within memory
// goes part by part, holding only the largest part at once.
func (h *History) EachPart(f func(part *History) error) error {
	h.mu.Lock()
	s, spilled := h.spill, h.spilled()
	h.mu.Unlock()
	if !spilled {
		return f(h)
	}
	h.mu.Lock()
	err := s.flush()
	var sizes []int64
	if err == nil {
		sizes, err = s.sizes()
	}
	// What memory holds, sorted into the parts once.
	prunes := slices.Clone(h.prunes)
	memOps := make([][]Op, SpillParts)
	for _, c := range append([][]Op{h.ops}, h.chunks...) {
		for _, op := range c {
			if op.Input.Kind == models.Prune {
				prunes = append(prunes, op)
				continue
			}
			i := partOf(op.Input.Key)
			memOps[i] = append(memOps[i], op)
		}
	}
	memByPart := make([][]Answer, SpillParts)
	for _, a := range h.answers {
		i := partOf(a.Key)
		memByPart[i] = append(memByPart[i], a)
	}
	workByPart := make([][]WorkRun, SpillParts)
	for _, w := range h.work {
		i := partOf(w.Key)
		workByPart[i] = append(workByPart[i], w)
	}
	faults := slices.Clone(h.faults)
	start, nextID := h.start, h.nextID
	h.mu.Unlock()
	if err != nil {
		return err
	}
	for i := range SpillParts {
		ops, answers, err := s.readPart(i, sizes[i])
		if err != nil {
			return err
		}
		ops = append(append(ops, prunes...), memOps[i]...)
		memOps[i] = nil
		slices.SortStableFunc(ops, func(a, b Op) int { return cmp.Compare(a.Call, b.Call) })
		part := &History{start: start, nextID: nextID, ops: ops, nops: len(ops), faults: faults,
			answers: append(answers, memByPart[i]...), work: workByPart[i]}
		if err := f(part); err != nil {
			return err
		}
	}
	return nil
}

// readBack reads every call and answer of a spilled history back, part
// by part, the calls in call order: its Ops and Answers, for a reader
// that needs all of them at once; nil if a part cannot be read.
func (h *History) readBack() ([]Op, []Answer) {
	var ops []Op
	var answers []Answer
	first := true
	err := h.EachPart(func(p *History) error {
		for _, op := range p.ops {
			if op.Input.Kind != models.Prune || first { // every part holds every Prune
				ops = append(ops, op)
			}
		}
		answers = append(answers, p.answers...)
		first = false
		return nil
	})
	if err != nil {
		return nil, nil
	}
	slices.SortStableFunc(ops, func(a, b Op) int { return cmp.Compare(a.Call, b.Call) })
	return ops, answers
}

// errFirstPart stops EachPart after the first part (Drawable).
var errFirstPart = errors.New("first part")

// Drawable is what a page can draw of the history: the history itself,
// or, for a spilled one, its first part (about 1/[SpillParts] of its
// keys, each whole), and whether it is all of it. A page of every key of
// millions of calls would hold them all in memory at once, and nobody
// reads it; history.jsonl holds every call.
func (h *History) Drawable() (*History, bool) {
	var first *History
	err := h.EachPart(func(p *History) error {
		first = p
		return errFirstPart
	})
	if first == nil || err != nil && err != errFirstPart {
		return New(), false
	}
	return first, first == h
}

// addAnswer appends a loaded answer (h.mu not needed: the history is
// being loaded), spilling as AddAnswer does.
func (h *History) addAnswer(a Answer) {
	h.answers = append(h.answers, a)
	if h.spill != nil {
		h.spillAnswers()
	}
}

// spilling makes the histories of a reader that spills (LoadSpilled,
// ReadJournalSpilled): the i'th spills past keep calls to dir/<i>.
func spilling(dir string, keep int) (func(int) *History, error) {
	if _, err := newSpill(dir, keep); err != nil {
		return nil, err
	}
	return func(i int) *History {
		s, _ := newSpill(filepath.Join(dir, strconv.Itoa(i)), keep)
		return &History{spill: s}
	}, nil
}
