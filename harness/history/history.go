// Package history is the record of a run: every store call a client made
// (with its input, its output and its call and return times on one
// monotonic clock), every execution of the guarded work, every injected
// fault, every client's final answer, and the payment provider's ledger.
// Producers (the workload, worker processes, the nemesis) write it through
// a Recorder and the Add methods; consumers (the checkers, the reports)
// read it. A saved history (history.jsonl) loads back into the same types,
// so a failing run can be re-checked and kept as a regression test.
//
// A call whose outcome is unknown (a timeout, a lost reply, a killed
// process) is recorded as such, with Return = Never: it may take effect at
// any moment after its call. It is never guessed.
package history

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// Never is the return time of a call whose outcome is unknown: it may take
// effect at any moment after its call.
const Never = int64(math.MaxInt64)

// Op is one store call as a client saw it. Times are nanoseconds since the
// history began, read from one monotonic clock.
type Op struct {
	Client int           `json:"client"`
	Input  models.Input  `json:"input"`
	Output models.Output `json:"output"`
	Call   int64         `json:"call"`
	Return int64         `json:"return"` // Never when the outcome is unknown
	Err    string        `json:"err,omitempty"`
	// ErrAt is when the error of a call whose outcome is unknown came
	// back to the client (0: not recorded, as for a call cut short by a
	// killed process). The call may still take effect later (Return is
	// Never); the availability checker asks whether the store should
	// have answered by then.
	ErrAt int64 `json:"err_at,omitempty"`
	// Deadline: the error of a call of unknown outcome, or of one declared
	// not applied, came once the call's own deadline had passed (it wraps
	// ErrPastDeadline): the client gave up waiting, a timeout, not an
	// error the store answered (a Postgres store declares a call not
	// applied when no session of its pool came free before the
	// deadline). The availability checker counts such an error as the
	// machine's or the store's slowness, not as a refusal.
	Deadline bool `json:"deadline,omitempty"`
	// Lost: that error was a fault injector's, answered in the store's
	// place when it lost the store's answer on the way back (it wraps
	// stores.ErrLost): an unknown outcome like any other error's, which
	// the availability checker counts as the fault it is, not as a
	// refusal the store chose.
	Lost bool `json:"lost,omitempty"`
}

// IsClaim reports whether the op is a Begin that answered Claimed.
func (op Op) IsClaim() bool {
	return op.Input.Kind == models.Begin && op.Output.Decided() && op.Output.Decision.Outcome == stores.Claimed
}

// Accepted reports whether the op is a call of kind that the store
// definitely accepted (not fenced, not unknown, not declared not applied).
func (op Op) Accepted(kind models.Kind) bool {
	return op.Input.Kind == kind && op.Output.Decided() && !op.Output.Fenced
}

// WorkRun is one execution of an order's work by an owner.
type WorkRun struct {
	Client   int           `json:"client"`
	Key      stores.KeyRef `json:"key"`
	Order    string        `json:"order"`
	Token    stores.Token  `json:"token"`
	Start    int64         `json:"start"`
	End      int64         `json:"end"` // Never if the owner stopped inside the work
	Failed   bool          `json:"failed,omitempty"`
	ChargeID string        `json:"charge_id,omitempty"`
	// Planned is how long the client meant its work to take (0: not
	// said). A run that goes on past it was held up by the machine, not
	// by its work: a goroutine of a starved process woke late from its
	// sleep. exclusive-execution counts that overrun as lease lost to the
	// harness, like a stall (check.leaseLost).
	Planned time.Duration `json:"planned_ns,omitempty"`
	// Beat is the time the work meant to sleep between heartbeats (its
	// Extend calls), 0 without heartbeats: each sleep that went on past
	// it was the machine's too.
	Beat time.Duration `json:"beat_ns,omitempty"`
}

// Answer is what a client finally got for one logical operation, after
// its retries: the response, or the error that ended it.
type Answer struct {
	Client      int             `json:"client"`
	Key         stores.KeyRef   `json:"key"`
	Order       string          `json:"order"`
	Fingerprint string          `json:"fingerprint"`
	Response    stores.Response `json:"response"`
	Status      int             `json:"status"` // HTTP status of the final answer
	Replayed    bool            `json:"replayed,omitempty"`
	Attempts    int             `json:"attempts"`
	Err         string          `json:"err,omitempty"`
	At          int64           `json:"at"`
}

// Definite reports whether the answer settles the operation: a response
// (the work's, a replay, or a saved error), or a 4xx that retrying cannot
// change. Crashes, give-ups and cancellations do not.
func (a Answer) Definite() bool {
	return a.Err == "" || a.Status == 400 || a.Status == 422
}

// History is the record of one scenario. It is safe for concurrent use.
type History struct {
	start time.Time
	mu    sync.Mutex
	// The store calls, in the order recorded: ops, the array Ops last
	// returned, then those recorded since, in chunks of opChunk (see push).
	ops    []Op
	chunks [][]Op
	nops   int // len(ops) plus the ops in chunks
	// unsorted: ops are not in call order (see Ops).
	unsorted bool
	// sorts counts the times Ops sorted ops: each moves them (see Mark).
	sorts   int
	work    []WorkRun
	faults  []Fault
	answers []Answer
	// exchanges are the HTTP requests of a black-box run.
	exchanges []Exchange
	nextID    int
	seq       int64 // numbers the calls announced to the sink
	// sink, when set, hears each record as it is made, and store calls
	// go only to it: a worker process streams its history to the harness
	// this way (see Sink).
	sink Sink
	// journal, when set, hears every record too (JournalTo).
	journal *journalOf
	// spill, when set, holds the calls and answers moved to disk
	// (SpillTo); prunes are the Prunes among the calls moved, kept here.
	spill  *spill
	prunes []Op
	// fencesGiven: a claim recorded gave a fencing number as a field
	// (FencesGiven).
	fencesGiven bool
	// takeovers holds the keys on which a Begin was answered as a
	// takeover (TakenOver).
	takeovers map[stores.KeyRef]bool
}

// Sink hears each record of a History as it is made. A worker process's
// history has one that writes the records to the harness, which keeps
// the run's one History; ops are then not kept in the process.
type Sink interface {
	// Call hears a store call about to be made (seq numbers the calls of
	// the History): if no Return follows, the call's outcome is unknown.
	Call(seq int64, op Op)
	// Return hears how the call seq returned; drop means it certainly
	// never reached the store and is left out of the history.
	Return(seq int64, op Op, drop bool)
	Work(i int, w WorkRun)
	WorkEnd(i int, end int64, failed bool, chargeID string)
	Fault(f Fault)
	Answer(a Answer)
}

// New starts an empty history; its clock starts now.
func New() *History { return &History{start: time.Now()} }

// Now is the history's monotonic clock: nanoseconds since it began.
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Started is the wall-clock time of the history's clock origin: a
// recorded time t happened at Started().Add(time.Duration(t)).
func (h *History) Started() time.Time { return h.start }

// NextID returns a new call id, unique in the history (models.Input.ID).
func (h *History) NextID() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextID++
	return h.nextID
}

// Has reports whether some recorded store call matches, scanning the
// calls in place (match runs under the history's lock: it must not call
// the History). A scenario waits on it for an event of the run, such as a
// takeover, without copying the history each time it looks.
func (h *History) Has(match func(Op) bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.scan(0, match)
}

// scan reports whether an op from the from'th on matches (h.mu held);
// calls moved to disk (SpillTo) are not scanned.
func (h *History) scan(from int, match func(Op) bool) bool {
	if h.spill != nil {
		from = max(from-h.spill.moved, 0)
	}
	for i := from; i < len(h.ops); i++ {
		if match(h.ops[i]) {
			return true
		}
	}
	from = max(from-len(h.ops), 0)
	for c := from / opChunk; c < len(h.chunks); c++ {
		for i := from % opChunk; i < len(h.chunks[c]); i++ {
			if match(h.chunks[c][i]) {
				return true
			}
		}
		from = 0
	}
	return false
}

// Mark is a place in the recorded store calls: HasSince looks only at the
// calls recorded after it.
type Mark struct{ n, sorts int }

// Mark returns the place after the calls recorded so far.
func (h *History) Mark() Mark {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Mark{h.nops, h.sorts}
}

// TakenOver reports whether a Begin on key was answered as a takeover (a
// claim over a stale one), in constant time, calls moved to disk
// (SpillTo) included: a scenario asks it of each key, and of a paused
// owner's key every millisecond, and a scan of the history per question
// (Has) grew with the run.
func (h *History) TakenOver(key stores.KeyRef) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.takeovers[key]
}

// HasSince is Has over the calls recorded since m, or over every call
// when Ops has sorted them since (their places moved). A scenario that
// waits for an event of one episode asks it at every decision: Has would
// scan the whole run's calls each time, and a run of many episodes would
// cost their square (sched-retention at 2,000 keys: 3.9 s of scenario
// instead of 1.0 s).
func (h *History) HasSince(m Mark, match func(Op) bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	from := m.n
	if m.sorts != h.sorts || from > h.nops {
		from = 0
	}
	return h.scan(from, match)
}

// AddOp records a store call that has returned (or whose outcome is now
// known to be unknown: Return = Never).
func (h *History) AddOp(op Op) {
	h.mu.Lock()
	h.push(op)
	jo := h.journal
	h.mu.Unlock()
	if jo != nil {
		jo.op("op", 0, false, &op)
	}
}

// opChunk is how many ops a chunk holds: calls are recorded into chunks
// that never move, so a growing history is not copied (under the lock
// every client records through) each time it doubles, which was a sixth
// of the stress scenario's CPU.
const opChunk = 1024

// push appends op (h.mu held), noting whether the ops stay in call order.
func (h *History) push(op Op) {
	if h.nops > 0 && op.Call < h.last().Call {
		h.unsorted = true
	}
	if n := len(h.chunks); n == 0 || len(h.chunks[n-1]) == opChunk {
		h.chunks = append(h.chunks, make([]Op, 0, opChunk))
	}
	n := len(h.chunks) - 1
	h.chunks[n] = append(h.chunks[n], op)
	h.nops++
	if !h.fencesGiven && op.IsClaim() && op.Output.Decision.Fence != 0 {
		h.fencesGiven = true
	}
	if op.IsClaim() && op.Output.Decision.Takeover {
		if h.takeovers == nil {
			h.takeovers = map[stores.KeyRef]bool{}
		}
		h.takeovers[op.Input.Key] = true
	}
	if h.spill != nil {
		h.spillCalls()
	}
}

// last is the op recorded last (h.mu held; there is one).
func (h *History) last() *Op {
	if n := len(h.chunks); n > 0 {
		c := h.chunks[n-1]
		return &c[len(c)-1]
	}
	return &h.ops[len(h.ops)-1]
}

// call announces a call to the sink and the journal, if any, and
// returns its sequence.
func (h *History) call(op Op) int64 { return h.announce("call", op) }

// announce is call, journaled as kind.
func (h *History) announce(kind string, op Op) int64 {
	h.mu.Lock()
	if h.sink == nil && h.journal == nil {
		h.mu.Unlock()
		return 0
	}
	h.seq++
	seq, jo := h.seq, h.journal
	h.mu.Unlock()
	if h.sink != nil {
		h.sink.Call(seq, op)
	}
	if jo != nil {
		jo.op(kind, seq, false, &op)
	}
	return seq
}

// ret records how call seq returned: to the sink, or in the history
// (unless dropped), and in the journal.
func (h *History) ret(seq int64, op Op, drop bool) {
	if h.sink != nil {
		h.sink.Return(seq, op, drop)
		return
	}
	h.mu.Lock()
	if !drop {
		h.push(op)
	}
	jo := h.journal
	h.mu.Unlock()
	if jo != nil {
		jo.op("ret", seq, drop, &op)
	}
}

// Announce records that a store call made elsewhere (by a worker
// process) is about to be made, in the journal: Returned records how it
// returned. It returns the call's sequence.
func (h *History) Announce(op Op) int64 { return h.announce("announce", op) }

// Returned records how the call seq, announced with Announce, returned;
// drop leaves it out (it never reached the store).
func (h *History) Returned(seq int64, op Op, drop bool) { h.ret(seq, op, drop) }

// AddWork records one execution of work and returns its index, so the
// caller can close it with EndWork.
func (h *History) AddWork(w WorkRun) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.work = append(h.work, w)
	if h.sink != nil {
		h.sink.Work(len(h.work)-1, w)
	}
	if h.journal != nil {
		h.journal.record("work", int64(len(h.work)-1), "work", w)
	}
	return len(h.work) - 1
}

// EndWork records that work i ended now.
func (h *History) EndWork(i int, failed bool, chargeID string) {
	h.EndWorkAt(i, h.Now(), failed, chargeID)
}

// EndWorkAt records that work i ended at t (history time): a worker
// process reports its own times.
func (h *History) EndWorkAt(i int, t int64, failed bool, chargeID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.work[i].End, h.work[i].Failed, h.work[i].ChargeID = t, failed, chargeID
	if h.sink != nil {
		h.sink.WorkEnd(i, t, failed, chargeID)
	}
	if h.journal != nil {
		h.journal.record("work_end", int64(i), "end", workEnd{t, failed, chargeID})
	}
}

// Faulting journals a fault about to be injected (f with its Start and
// kind, no End yet), when h has a journal: a run whose process dies
// during the fault leaves it on disk, read back as lasting to the end of
// the journal (ReadJournal), so that what it excuses (a second charge
// after a kill) stays excused. [History.AddFault] records it once over.
func (h *History) Faulting(f Fault) {
	if jo := h.journalOf(); jo != nil {
		jo.record("fault_start", 0, "fault", f)
	}
}

// AddFault records an injected fault.
func (h *History) AddFault(f Fault) {
	h.mu.Lock()
	h.faults = append(h.faults, f)
	if h.sink != nil {
		h.sink.Fault(f)
	}
	if h.journal != nil {
		h.journal.record("fault", 0, "fault", f)
	}
	h.mu.Unlock()
}

// AddAnswer records a client's final answer for an operation.
func (h *History) AddAnswer(a Answer) {
	h.mu.Lock()
	h.answers = append(h.answers, a)
	if h.spill != nil {
		h.spillAnswers()
	}
	if h.sink != nil {
		h.sink.Answer(a)
	}
	jo := h.journal
	h.mu.Unlock()
	if jo != nil { // encoded outside the lock every client records through
		jo.j.add(func(b []byte) []byte { return appendAnswerLine(b, jo.name, &a) })
	}
}

// OpCount is the number of store calls recorded so far.
func (h *History) OpCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nops
}

// FencesGiven reports whether a claim recorded gave a fencing number as
// a field (stores.Decision.Fence): a store that gives them is held to
// them on every claim, and a part of a spilled history (EachPart) may
// hold no claim that says so.
func (h *History) FencesGiven() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fencesGiven
}

// FaultCount is the number of faults recorded so far.
func (h *History) FaultCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.faults)
}

// Ops returns the store calls sorted by call time. The slice is shared,
// not a copy: read it, never write to it. Ops are recorded as they return,
// so the first call after recording sorts them into a new array, which
// the history keeps; later calls (every checker, the report, the history
// file) get the same array for free, and a million recorded calls exist
// once, not once per reader. Calls recorded later are appended beyond
// every slice already returned (its capacity ends at its length), and a
// new sort makes a new array, so a returned slice never changes.
//
// A spilled history (SpillTo) reads every call back from disk into a new
// array each time, or nil if it cannot: a reader that must stay within
// memory goes part by part instead ([History.EachPart]).
func (h *History) Ops() []Op {
	if h.Spilled() {
		ops, _ := h.readBack()
		return ops
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.chunks) == 0 && !h.unsorted {
		return h.ops[:len(h.ops):len(h.ops)]
	}
	// One array of every op, each copied once; the chunks go.
	at := func(i int32) *Op {
		if int(i) < len(h.ops) {
			return &h.ops[i]
		}
		j := int(i) - len(h.ops)
		return &h.chunks[j/opChunk][j%opChunk]
	}
	out := make([]Op, h.nops)
	if h.unsorted {
		// Sort indices, then copy each op once: sorting the ops themselves
		// moves every (large) Op O(log n) times.
		idx := make([]int32, h.nops)
		for i := range idx {
			idx[i] = int32(i)
		}
		slices.SortStableFunc(idx, func(a, b int32) int { return cmp.Compare(at(a).Call, at(b).Call) })
		for i, j := range idx {
			out[i] = *at(j)
		}
		h.sorts++
	} else {
		n := copy(out, h.ops)
		for _, c := range h.chunks {
			n += copy(out[n:], c)
		}
	}
	h.ops, h.chunks, h.unsorted = out, nil, false
	return h.ops[:len(h.ops):len(h.ops)]
}

// Work returns the work executions in start order.
func (h *History) Work() []WorkRun {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := append([]WorkRun(nil), h.work...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// Faults returns the injected faults.
func (h *History) Faults() []Fault {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Fault(nil), h.faults...)
}

// Answers returns the clients' final answers (of a spilled history, read
// back from disk; nil if they cannot be).
func (h *History) Answers() []Answer {
	if h.Spilled() {
		_, answers := h.readBack()
		return answers
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Answer(nil), h.answers...)
}

// ByKey groups ops by key, leaving out Prunes (which apply to every key),
// and returns the keys in order of first appearance.
func ByKey(ops []Op) (map[stores.KeyRef][]Op, []stores.KeyRef) {
	// Two passes: count each key's ops, then fill exact slices cut from
	// one array, so no slice grows (and is copied) op by op.
	count := map[stores.KeyRef]int{}
	var order []stores.KeyRef
	total := 0
	for i := range ops {
		if ops[i].Input.Kind == models.Prune {
			continue
		}
		k := ops[i].Input.Key
		if _, ok := count[k]; !ok {
			order = append(order, k)
		}
		count[k]++
		total++
	}
	all := make([]Op, 0, total)
	m := make(map[stores.KeyRef][]Op, len(order))
	for _, k := range order {
		n := count[k]
		m[k] = all[len(all) : len(all) : len(all)+n]
		all = all[:len(all)+n]
	}
	for i := range ops {
		if ops[i].Input.Kind == models.Prune {
			continue
		}
		k := ops[i].Input.Key
		m[k] = append(m[k], ops[i])
	}
	return m, order
}

// Millis prints a history time in milliseconds, as traces and violations
// show it ("never" for Never).
func Millis(ns int64) string {
	if ns == Never {
		return "never"
	}
	return fmt.Sprintf("%.1fms", float64(ns)/1e6)
}
