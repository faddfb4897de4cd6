package history

import (
	"encoding/json"
	"io"
	"strconv"
	"sync"
	"time"
)

// Journal writes the records of a run's histories to a file as they are
// made, so that a run whose process dies (killed, out of memory, the
// machine stopped) leaves its evidence on disk: ReadJournal reads it back
// and the harness judges what it holds (harness.Recover). history.jsonl,
// written when a run ends, stays the run's record; a finished run's
// journal is removed.
//
// A store call is announced before it is made and journaled when it
// returns: as one "op" line when it returned before the journal's next
// write and no other call's answer was queued since it was announced,
// else as a "call" line at that write and a "ret" line after. Lines are
// queued in the order they are made and written in that order, a little
// behind (JournalEvery), a write's "call" lines first, so a journal cut
// anywhere (a torn last line included) holds a prefix of the run: every
// call whose effect a recorded answer shows was announced before that
// answer was recorded, and its line (one "op", or its "call") comes
// before the answer's; a call announced but never returned is read back
// as of unknown outcome, as a killed worker's is.
//
// Encoding happens in the recording goroutine, writing in the Journal's
// own. A write that fails (a full disk) stops the journal, not the run:
// Err says why.
type Journal struct {
	mu  sync.Mutex
	buf []byte // lines made since the last write
	// pending are the calls announced since the last write and not yet
	// returned: a call that returns before the next write is journaled
	// once, whole (an "op" line), and only one still in flight at a write
	// gets its "call" line, written ahead of that write's lines.
	pending map[pendKey]pendingCall
	// answered counts the answers queued since the last write (lines of
	// calls that returned): a call announced before one of them keeps
	// its "call" line, so that line comes first (see journalOf.op).
	answered int
	w        io.WriteCloser
	err      error
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// JournalEvery is how far behind the record the journal's writes are: a
// crash loses at most the lines of this long (a prefix stays).
const JournalEvery = 100 * time.Millisecond

// journalBuffer is the queue length past which the writer is not waited
// for: the recording goroutine writes itself, so a storm of calls cannot
// queue more than this in memory.
const journalBuffer = 8 << 20

// NewJournal starts a journal writing to w, which it closes on Close.
func NewJournal(w io.WriteCloser) *Journal {
	j := &Journal{w: w, stop: make(chan struct{}), done: make(chan struct{}), pending: map[pendKey]pendingCall{}}
	go j.loop()
	return j
}

func (j *Journal) loop() {
	defer close(j.done)
	t := time.NewTicker(JournalEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			j.flush()
		case <-j.stop:
			j.flush()
			return
		}
	}
}

// flush writes the lines queued so far, in order.
func (j *Journal) flush() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.writeLocked()
}

// writeLocked writes the queue (j.mu held, so lines stay in order),
// after the "call" lines of the calls still in flight: each was made
// after every line written before, so ahead of this write's lines it
// still comes before any answer that could show its effect.
func (j *Journal) writeLocked() {
	var head []byte
	for k, p := range j.pending {
		head = k.jo.appendLine(head, "call", k.seq, false, &p.op)
	}
	clear(j.pending)
	j.answered = 0
	if len(head) == 0 && len(j.buf) == 0 || j.err != nil {
		j.buf = j.buf[:0]
		return
	}
	out := j.buf
	if len(head) > 0 {
		out = append(head, j.buf...)
	}
	if _, err := j.w.Write(out); err != nil {
		j.err = err
	}
	j.buf = j.buf[:0]
}

// pendingCall is a call announced since the journal's last write: the
// call, and how many answers were queued before it was announced.
type pendingCall struct {
	op       Op
	answered int
}

// pendKey names a call announced to the journal: its history's and its
// sequence there.
type pendKey struct {
	jo  *journalOf
	seq int64
}

// add queues one line built by line. The line is built outside the
// lock (recording goroutines encode side by side) and queued whole under
// it, before add returns: a call's line is queued before the call is made.
func (j *Journal) add(line func(b []byte) []byte) {
	bp := linePool.Get().(*[]byte)
	b := line((*bp)[:0])
	j.mu.Lock()
	if j.err == nil {
		j.buf = append(j.buf, b...)
		if len(j.buf) > journalBuffer {
			j.writeLocked()
		}
	}
	j.mu.Unlock()
	if cap(b) <= 64<<10 {
		*bp = b
		linePool.Put(bp)
	}
}

// linePool holds the buffers lines are built in.
var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Note journals a line of the harness's own (kind: what it is; v: its
// data, encoded as JSON under "data"), for scenario ("" for the run), and
// writes what is queued.
func (j *Journal) Note(scenario, kind string, v any) {
	j.record(scenario, kind, 0, "data", v)
	// Written at once: a process that dies in its first moments still
	// leaves the run's plan and what each scenario is judged by.
	j.flush()
}

// record journals v as JSON under field, in a line of scenario's.
func (j *Journal) record(scenario, kind string, seq int64, field string, v any) {
	data := encodeRecord(v)
	j.add(func(b []byte) []byte {
		b = appendJournalHead(b, scenario, kind, seq)
		b = append(b, '"')
		b = append(b, field...)
		b = append(b, `":`...)
		b = append(b, data...)
		return append(b, "}\n"...)
	})
}

// encodeRecord is v as encoding/json writes it: work runs, their ends
// and charges, recorded under the locks every client records through,
// without reflection (appendWork, appendWorkEnd, appendCharge); the rest
// (faults, exchanges: few) by json.Marshal, or the error it gave.
func encodeRecord(v any) []byte {
	switch x := v.(type) {
	case WorkRun:
		return appendWork(nil, &x)
	case workEnd:
		return appendWorkEnd(nil, &x)
	case Charge:
		return appendCharge(nil, &x)
	}
	data, err := json.Marshal(v)
	if err != nil {
		data, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	return data
}

// Err is why the journal stopped writing (nil: it did not).
func (j *Journal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// Close writes what is queued and closes the file; the journal takes no
// more lines after it.
func (j *Journal) Close() error {
	j.once.Do(func() {
		close(j.stop)
		<-j.done
		j.mu.Lock()
		if cerr := j.w.Close(); j.err == nil {
			j.err = cerr
		}
		if j.err == nil {
			j.err = errJournalClosed
		}
		j.mu.Unlock()
	})
	if err := j.Err(); err != errJournalClosed {
		return err
	}
	return nil
}

var errJournalClosed = journalError("the journal is closed")

type journalError string

func (e journalError) Error() string { return string(e) }

// appendJournalHead starts a journal line: its scenario, its type and,
// when not 0, its sequence number; the caller appends the rest and "}\n".
func appendJournalHead(b []byte, scenario, kind string, seq int64) []byte {
	b = append(b, `{"scenario":`...)
	b = appendJSONString(b, scenario)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, kind)
	b = append(b, ',')
	if seq != 0 {
		b = append(b, `"seq":`...)
		b = strconv.AppendInt(b, seq, 10)
		b = append(b, ',')
	}
	return b
}

// journalOf is a History's journal and the name its lines carry.
type journalOf struct {
	j    *Journal
	name string
}

// JournalTo journals every record of h from now on to j, under the
// scenario name. Call it before any record is made.
func (h *History) JournalTo(j *Journal, name string) {
	h.mu.Lock()
	h.journal = &journalOf{j, name}
	h.mu.Unlock()
}

// JournalTo journals every charge of l from now on to j, under name.
func (l *Ledger) JournalTo(j *Journal, name string) {
	l.mu.Lock()
	l.journal = &journalOf{j, name}
	l.mu.Unlock()
}

// Note journals a line of the harness's own about h's scenario (see
// Journal.Note); nothing when h has no journal.
func (h *History) Note(kind string, v any) {
	if jo := h.journalOf(); jo != nil {
		jo.j.Note(jo.name, kind, v)
	}
}

func (h *History) journalOf() *journalOf {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.journal
}

// op journals a store call: announced ("call", or "announce" for a
// worker process's), returned ("ret", drop: it never reached the store)
// or recorded whole ("op"). A call is held until the journal's next write
// (Journal.pending): one that returned by then is journaled as one "op"
// line, or not at all when dropped.
func (jo *journalOf) op(kind string, seq int64, drop bool, op *Op) {
	j := jo.j
	switch kind {
	case "call":
		j.mu.Lock()
		if j.err == nil {
			j.pending[pendKey{jo, seq}] = pendingCall{*op, j.answered}
		}
		j.mu.Unlock()
		return
	case "ret":
		// The line's tail (the call and its answer), encoded outside the
		// lock; under it, the head says which line it is.
		bp := linePool.Get().(*[]byte)
		defer linePool.Put(bp)
		tail := appendCallTail((*bp)[:0], drop, op)
		*bp = tail[:0]
		j.mu.Lock()
		defer j.mu.Unlock()
		if j.err != nil {
			return
		}
		k := pendKey{jo, seq}
		if p, ok := j.pending[k]; ok && p.answered == j.answered {
			// No answer was queued since the call was announced: its one
			// line ("op"; none when dropped), queued now, comes after
			// everything made before it.
			delete(j.pending, k)
			if !drop {
				j.buf = append(appendJournalHead(j.buf, jo.name, "op", 0), tail...)
			}
		} else {
			// Its "call" line is written, or, still pending, will be ahead
			// of the next write's lines (another call's answer was queued
			// meanwhile, and may show this call's effect): the return's
			// own line follows.
			j.buf = append(appendJournalHead(j.buf, jo.name, "ret", seq), tail...)
		}
		if !drop {
			j.answered++
		}
		if len(j.buf) > journalBuffer {
			j.writeLocked()
		}
		return
	}
	j.add(func(b []byte) []byte { return jo.appendLine(b, kind, seq, drop, op) })
	if kind == "op" { // an answer, recorded whole
		j.mu.Lock()
		j.answered++
		j.mu.Unlock()
	}
}

// appendLine appends the journal line of a store call.
func (jo *journalOf) appendLine(b []byte, kind string, seq int64, drop bool, op *Op) []byte {
	return appendCallTail(appendJournalHead(b, jo.name, kind, seq), drop, op)
}

// appendCallTail appends the rest of a store call's journal line after
// its head: drop, if set, and the call.
func appendCallTail(b []byte, drop bool, op *Op) []byte {
	if drop {
		b = append(b, `"drop":true,`...)
	}
	b = append(b, `"op":`...)
	if body, ok := appendOp(b, op); ok {
		return append(body, "}\n"...)
	}
	data, err := json.Marshal(op)
	if err != nil { // a time encoding/json refuses: the line says so
		data, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	return append(append(b, data...), "}\n"...)
}

// record journals any other record of jo's history as JSON under field.
func (jo *journalOf) record(kind string, seq int64, field string, v any) {
	jo.j.record(jo.name, kind, seq, field, v)
}

// workEnd is a journaled end of a work run.
type workEnd struct {
	End      int64  `json:"end"`
	Failed   bool   `json:"failed,omitempty"`
	ChargeID string `json:"charge_id,omitempty"`
}
