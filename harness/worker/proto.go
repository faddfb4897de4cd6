package worker

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/stores"
)

// The worker protocol: JSON lines on the worker's stdin (toWorker) and
// stdout (fromWorker). The harness sends a setup line, then orders; the
// worker runs them one after another as one client and reports, as they
// happen, every store call (a "call" line before the call, a "ret" line
// after it), work run, fault and answer, with times on the harness's
// history clock (history.FromMono). A call with a "call" but no "ret"
// line when the worker dies was in flight: the harness records it as an
// unknown outcome. At an announced failpoint the worker stops and asks; the
// harness answers "go", or kills it there. Charges go to the harness, which
// holds the one ledger (the provider is foreign state, shared by everyone).

// EnvVar is set to "1" in every worker process's environment, so a test
// binary started as a worker can tell (its TestMain then calls Main).
const EnvVar = "IDEMCHECK_WORKER"

// Setup is the first line the harness sends a worker process: what
// store to open (the same file, DSN or address, and namespace as the
// harness's), which client it is, and how the client behaves.
type Setup struct {
	Backend string        `json:"backend"`
	Addr    string        `json:"addr"`
	Config  stores.Config `json:"config"`
	Client  int           `json:"client"`
	// MonoStart is the harness history's start on CLOCK_MONOTONIC (ns):
	// the worker stamps its events in the history's own time.
	MonoStart       int64              `json:"mono_start"`
	Seed            int64              `json:"seed"`
	MaxAttempts     int                `json:"max_attempts"`
	Backoff         time.Duration      `json:"backoff"`
	MaxBackoff      time.Duration      `json:"max_backoff"`
	WorkTime        time.Duration      `json:"work_time"`
	CallTimeout     time.Duration      `json:"call_timeout,omitempty"`
	MaxUnknown      int                `json:"max_unknown,omitempty"` // per order; 0: no limit
	Policy          stores.ErrorPolicy `json:"policy"`
	Keys            workload.KeyPolicy `json:"keys"`
	DownstreamKeyed bool               `json:"downstream_keyed"`
	DownstreamByKey bool               `json:"downstream_by_key,omitempty"`
	FirstWorkTime   time.Duration      `json:"first_work_time,omitempty"`
	// Announce lists the failpoints at which the worker stops and asks.
	Announce []string `json:"announce,omitempty"`
}

// toWorker is one line from the harness to a worker.
type toWorker struct {
	Setup  *Setup          `json:"setup,omitempty"`
	Order  *workload.Order `json:"order,omitempty"`
	Go     int64           `json:"go,omitempty"`     // resume the failpoint with this seq
	Charge *chargeReply    `json:"charge,omitempty"` // the provider's answer
	Close  bool            `json:"close,omitempty"`  // no more orders: finish and exit
}

type chargeReply struct {
	Seq int64  `json:"seq"`
	ID  string `json:"id"`
}

// fromWorker is one line from a worker to the harness.
type fromWorker struct {
	Ready     bool            `json:"ready,omitempty"`
	Error     string          `json:"error,omitempty"`
	Call      *opEvent        `json:"call,omitempty"`
	Ret       *opEvent        `json:"ret,omitempty"`
	Work      *workEvent      `json:"work,omitempty"`
	WorkEnd   *workEndEvent   `json:"work_end,omitempty"`
	Answer    *history.Answer `json:"answer,omitempty"`
	Fault     *history.Fault  `json:"fault,omitempty"`
	Failpoint *failpointEvent `json:"failpoint,omitempty"`
	Charge    *chargeEvent    `json:"charge,omitempty"`
}

// opEvent is a store call: announced (call) or finished (ret). Drop means
// the call failed without reaching the server: leave it out.
type opEvent struct {
	Seq  int64      `json:"seq"`
	Op   history.Op `json:"op"`
	Drop bool       `json:"drop,omitempty"`
}

type workEvent struct {
	Seq int             `json:"seq"`
	Run history.WorkRun `json:"run"`
}

type workEndEvent struct {
	Seq      int    `json:"seq"`
	End      int64  `json:"end"`
	Failed   bool   `json:"failed,omitempty"`
	ChargeID string `json:"charge_id,omitempty"`
}

type failpointEvent struct {
	Seq  int64         `json:"seq"`
	Name string        `json:"name"`
	Key  stores.KeyRef `json:"key"`
	At   int64         `json:"at"`
}

type chargeEvent struct {
	Seq   int64  `json:"seq"`
	Order string `json:"order"`
	Key   string `json:"key,omitempty"`
	At    int64  `json:"at"`
}

// writeLine writes m as one JSON line under mu, the protocol's framing in
// both directions. A write error (the other end died) is ignored: the
// reader side records what was lost.
func writeLine(mu *sync.Mutex, w io.Writer, m any) {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // our own types always marshal
	}
	mu.Lock()
	defer mu.Unlock()
	_, _ = w.Write(append(b, '\n'))
}
