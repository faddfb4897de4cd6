package history

import (
	"fmt"
	"sort"
	"time"
)

// Purposes of an HTTP exchange: why the black-box workload sent it, so
// that the checkers know what answer the draft asks for.
const (
	// PurposeFirst is the first attempt of a new key with its body.
	PurposeFirst = "first"
	// PurposeRetry re-sends a key with its original body after a lost or
	// refused answer (a connection error, 409, 5xx).
	PurposeRetry = "retry"
	// PurposeRace sends a new key's first attempt from a second client at
	// the same moment, to another instance (a double submit).
	PurposeRace = "race"
	// PurposeReplay re-sends a key that already got an answer, with its
	// original body: the answer must be the saved one.
	PurposeReplay = "replay"
	// PurposeReuse sends a used key with another body: 422 (or 409 while
	// the key is in flight), never a success.
	PurposeReuse = "reuse"
	// PurposeMissing sends no Idempotency-Key at all: 400.
	PurposeMissing = "missing-key"
	// PurposeLong sends a key longer than the service's limit: 400.
	PurposeLong = "long-key"
	// PurposeProbe is sent after every fault has healed, to keys whose
	// last answer was not definite: the key must not stay stuck.
	PurposeProbe = "probe"
	// PurposeFresh sends a new key, for a new order, during the final
	// probes, while a probed key is refused ([TryAgain]): a fresh key the
	// service answers beside the refusals says they are the probed key's
	// own (a claim never released), not a limiter's, which refuses any
	// key. Nothing else judges it: it is one request, never retried.
	PurposeFresh = "fresh"
	// PurposeNoKey sends no Idempotency-Key to a service that declared the
	// key optional: it must be served as a plain request.
	PurposeNoKey = "no-key"
)

// Exchange is one HTTP request to a service under test and what came
// back, as the client saw it. Times are history times (nanoseconds since
// the history began); Return is Never when no HTTP answer came (a
// connection error or a timeout), and the request may still take effect.
type Exchange struct {
	Client   int    `json:"client"`
	Instance string `json:"instance"` // which target (instance) it was sent to
	Purpose  string `json:"purpose"`
	Key      string `json:"key,omitempty"` // the Idempotency-Key sent ("" when none)
	HasKey   bool   `json:"has_key"`
	Order    string `json:"order"` // the order the body names (the ledger's unit)
	Body     string `json:"body"`
	Attempt  int    `json:"attempt"` // 1 for the first attempt of an operation
	Call     int64  `json:"call"`
	Return   int64  `json:"return"`
	Status   int    `json:"status,omitempty"` // 0 when no answer came
	Reply    string `json:"reply,omitempty"`
	Err      string `json:"err,omitempty"`
	// ErrAt is when the error that ended an unanswered exchange came.
	ErrAt int64 `json:"err_at,omitempty"`
	// RetryAfter is the wait the answer's Retry-After header asked for,
	// in nanoseconds (0: none): a refusal that asked a wait the final
	// probes could not honour says nothing of the key (a limiter that
	// goes by the key refuses every retry sent sooner).
	RetryAfter int64 `json:"retry_after,omitempty"`
}

// Answered reports whether an HTTP answer came back.
func (x Exchange) Answered() bool { return x.Status != 0 }

// Sending journals an HTTP request about to be sent (x with its Call
// set, no answer yet), when h has a journal: a run whose process dies
// before the answer comes leaves the request on disk, read back as
// unanswered (ReadJournal), so that what it may have caused (a charge)
// never looks uncaused. [History.AddExchange] records it once answered.
func (h *History) Sending(x Exchange) {
	if jo := h.journalOf(); jo != nil {
		jo.record("sending", 0, "exchange", x)
	}
}

// AddExchange records one HTTP exchange.
func (h *History) AddExchange(x Exchange) {
	h.mu.Lock()
	h.exchanges = append(h.exchanges, x)
	jo := h.journal
	h.mu.Unlock()
	if jo != nil {
		jo.record("exchange", 0, "exchange", x)
	}
}

// NoteCrash journals an instance's exit by itself (a black-box run's
// supervisor keeps the crashes; this leaves them on disk too): a run
// recovered from its journal reports them (Journaled.Crashes).
func (h *History) NoteCrash(c Crash) {
	if jo := h.journalOf(); jo != nil {
		jo.record("crash", 0, "crash", c)
	}
}

// Exchanges returns the HTTP exchanges sorted by call time.
func (h *History) Exchanges() []Exchange {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := append([]Exchange(nil), h.exchanges...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Call < out[j].Call })
	return out
}

// Effect records one effect the payment provider applied for an order,
// made by the named instance (via; "" when the provider cannot tell),
// with the downstream idempotency key the service sent ("" for none). It
// returns the charge id, which [Ledger.Answer] takes once the provider
// answered.
func (l *Ledger) Effect(order, via, key string, at int64) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.made++
	id := fmt.Sprintf("ch_%d", l.made)
	l.charges = append(l.charges, Charge{ID: id, Order: order, Key: key, Client: -1, Via: via, At: at, Effective: true})
	if l.journal != nil {
		l.journal.record("effect", 0, "charge", l.charges[len(l.charges)-1])
	}
	return id
}

// Deduplicated records a charge request the payment provider made no
// effect for, because its downstream idempotency key was the key of the
// effect id: it answered that effect again, or refused the request (the
// effect still in progress, or the key sent with another order).
func (l *Ledger) Deduplicated(order, via, key, id string, at int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.charges = append(l.charges, Charge{ID: id, Order: order, Key: key, Client: -1, Via: via, At: at})
	if l.journal != nil {
		l.journal.record("charge", 0, "charge", l.charges[len(l.charges)-1])
	}
}

// Answer records how and when the provider answered the effect id: one
// of the Outcome constants, at time end.
func (l *Ledger) Answer(id, outcome string, end int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.charges) - 1; i >= 0; i-- {
		if l.charges[i].ID == id && l.charges[i].Effective {
			l.charges[i].Outcome, l.charges[i].End = outcome, end
			if l.journal != nil {
				l.journal.record("effect_end", 0, "charge", l.charges[i])
			}
			return
		}
	}
}

// FaultInstanceExit is an instance of a black-box run that exited by
// itself (a crash of the service, not a fault idemcheck injected): its
// window runs from the exit to the restart.
const FaultInstanceExit FaultKind = "instance-exit"

// Crash is an instance of a black-box run that exited by itself: when,
// how (its exit status), the tail of its log, and when it answered again
// after idemcheck restarted it (0 if it never did).
type Crash struct {
	Instance  string `json:"instance"`
	At        int64  `json:"at"`
	Status    string `json:"status"`
	LogTail   string `json:"log_tail,omitempty"`
	Restarted int64  `json:"restarted,omitempty"`
	// Err says why a restart failed, if it did.
	Err string `json:"err,omitempty"`
}

// Final reports whether an answer settles a keyed request: a success, or
// a client error that retrying with the same key cannot change. 409 (the
// key is in flight), 423 (locked), 425, 429 and 408 ask the client to try
// again, and a 5xx says nothing about the key: none of them settles it.
func Final(status int) bool {
	switch status {
	case 408, 409, 423, 425, 429:
		return false
	}
	return status >= 200 && status < 300 || status >= 400 && status < 500
}

// TryAgain reports whether an answer is one that a rate limiter, a
// timeout middleware or a gateway in front of a service gives without
// the request reaching its idempotency layer, and that HTTP says to try
// again later (RFC 9110, RFC 6585, RFC 8470): 408, 425, 429, 502, 503
// and 504. Such an answer says nothing of the key: it is neither a
// replay nor a refusal of the key, and a retry may get either. (nginx's
// limit_req answers 503, Go's http.TimeoutHandler 503, a gateway 502 or
// 504.)
func TryAgain(status int) bool {
	switch status {
	case 408, 425, 429, 502, 503, 504:
		return true
	}
	return false
}

// RefusalLasts is how long a key's [TryAgain] answers must go on before
// they are taken for the key's own: the final probes stop on a repeated
// one only once it has lasted this long, and the liveness checker judges
// none that lasted less (a limiter or an overloaded service refuses a
// moment, and the next try gets through).
const RefusalLasts = time.Second
