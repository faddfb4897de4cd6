package results

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/internal/clip"
)

// ScenarioResult is one scenario's outcome and what it measured.
type ScenarioResult struct {
	Name string `json:"name"`
	// Repetition numbers the runs of the same scenario in one run (--count,
	// or the name listed twice): 0 for the first.
	Repetition int `json:"repetition,omitempty"`
	// Doc says in a line what the scenario does (scenario.Scenario.Doc).
	Doc string `json:"doc"`
	// Cut, when set, says the run's process died while the scenario ran:
	// it was judged afterwards on what its journal recorded
	// (harness.Recover), and a re-check judges it the same way.
	Cut *Cut `json:"cut,omitempty"`
	// Interrupted: an interrupt cut this scenario short while it ran, so
	// what the run's own cancel can fake was not judged (a recheck
	// judges it so again).
	Interrupted bool `json:"interrupted,omitempty"`
	// Retention is the scenario's store's retention (the run's, or the
	// scenario's own).
	Retention Duration `json:"retention,omitempty"`
	// LockTTL is the scenario's store's LockTTL: the run's, or for the
	// scheduled scenarios on a server-clock store the shorter one the
	// runner chose (harness.Options.LockTTLFor).
	LockTTL Duration `json:"lock_ttl,omitempty"`
	// OwnServer says the scenario ran on a server started for it
	// (Options.OwnServer), beside the shared scenarios.
	OwnServer bool          `json:"own_server,omitempty"`
	Verdict   check.Verdict `json:"verdict"`
	Ops       int           `json:"ops"` // store calls
	Rounds    int           `json:"rounds"`
	Clients   int           `json:"clients"` // clients that took part
	Keys      int           `json:"keys"`
	// MaxConcurrentBegins is the most Begin calls in flight at once on one
	// key: proof the scenario raced for real.
	MaxConcurrentBegins int               `json:"max_concurrent_begins"`
	WorkRuns            int               `json:"work_runs"`
	Charges             int               `json:"charges"`
	Faults              map[string]int    `json:"faults"`
	Outcomes            map[string]int    `json:"outcomes"`
	Seconds             float64           `json:"seconds"`
	Checkers            []check.Result    `json:"checkers"`
	Violations          []check.Violation `json:"violations"`
	Error               string            `json:"error,omitempty"`
	// FirstUnknown is the error of the first store call whose outcome
	// is unknown (Outcomes["unknown"] counts them; a fault injector's
	// lost answers and the client's deadlines aside): an undecided run
	// says it, so that a server gone away is named, not guessed.
	FirstUnknown string `json:"first_unknown,omitempty"`

	// Notes say what the verdict did not judge, although the scenario ran:
	// a scheduled scenario whose store passed no failpoint inside its
	// calls was interleaved only between them (scenario.BetweenCallsOnly).
	Notes []string `json:"notes,omitempty"`

	// Skipped says why the scenario did not run (its verdict is "skipped").
	Skipped string `json:"skipped,omitempty"`
	// Findings counts expected effects a scenario measures that are not
	// violations, e.g. skew_takeovers: healthy owners taken over by a
	// client whose clock runs ahead, which caller-clock stores allow.
	Findings map[string]int `json:"findings,omitempty"`
	// Schedule lists the faults the scenario planned, in order: a pure
	// function of the seed, so a failing run can be replayed.
	Schedule []string `json:"schedule,omitempty"`
	// Check is what the checkers judged the history by (nil if the
	// scenario did not run): with history.jsonl, enough to re-check it.
	Check *check.Params `json:"check,omitempty"`
	// Episodes records each scheduled episode's choices, so `idemcheck
	// replay` can run it again on the same interleaving.
	Episodes []scenario.EpisodeRecord `json:"episodes,omitempty"`

	hist   *history.History
	ledger *history.Ledger
}

// ID is the result's identity in its run: its scenario and repetition.
func (r *ScenarioResult) ID() ID { return ID{Scenario: r.Name, Repetition: r.Repetition} }

// Attach gives the result what it was judged from: its history and
// ledger. A run attaches them as it ends; a saved run's loader
// (harness.LoadRun) from its files.
func (r *ScenarioResult) Attach(hist *history.History, ledger *history.Ledger) {
	r.hist, r.ledger = hist, ledger
}

// History returns the scenario's recorded history (nil if it was skipped).
func (r *ScenarioResult) History() *history.History { return r.hist }

// Ledger returns the scenario's payment-provider ledger: every charge the
// work made, for reports that show a key's charges.
func (r *ScenarioResult) Ledger() *history.Ledger { return r.ledger }

// Linearization returns what the linearizability checker kept for a
// page of the history (nil if it kept nothing): report draws it.
func (r *ScenarioResult) Linearization() *check.Linearization {
	for _, c := range r.Checkers {
		if c.Linearization != nil {
			return c.Linearization
		}
	}
	return nil
}

// Cut is what the history of a scenario cut short by its process's death
// cannot show.
type Cut struct {
	// InFlight counts its calls announced and never returned.
	InFlight int `json:"in_flight"`
	// Announced: its worker processes announced calls through pipes, so
	// the journal may hold an answer without the call behind it.
	Announced bool `json:"announced,omitempty"`
	// InFlightPrune: a Prune was in flight, and ran by a clock the journal
	// never saw.
	InFlightPrune bool `json:"in_flight_prune,omitempty"`
}

// Summary is a whole run's outcome: what `--json` prints.
type Summary struct {
	Verdict check.Verdict `json:"verdict"`
	Store   string        `json:"store"`
	Variant string        `json:"variant"`
	Seed    int64         `json:"seed"`
	Clients int           `json:"clients"`
	Keys    int           `json:"keys"`
	LockTTL Duration      `json:"lock_ttl"`
	// Retention is the run's (--retention): the scenarios that keep their
	// own (ScenarioResult.Retention: retention, store-faults, a
	// replicated topology's) say so beside it. 0 in a run saved before.
	Retention  Duration          `json:"retention,omitempty"`
	Started    time.Time         `json:"started"`
	Seconds    float64           `json:"seconds"`
	Scenarios  []ScenarioResult  `json:"scenarios"`
	Violations []check.Violation `json:"violations"`
	Dir        string            `json:"results_dir,omitempty"`
	// Ended is when the run ended; Interrupted says it was cut short
	// (Ctrl-C, SIGTERM), and NotRun lists the scenario runs it never started,
	// by their [ID] ("race.2": the second of --count).
	Ended       time.Time `json:"ended"`
	Interrupted bool      `json:"interrupted"`
	NotRun      []string  `json:"not_run,omitempty"`
	// Stopped says why the harness itself cut the run short, when it
	// did (a memory limit, harness.Options.MaxMemory); Interrupted is
	// then set too. "" for a run that ran out or was interrupted.
	Stopped string `json:"stopped,omitempty"`
	// OwnServerError says why the server-fault scenarios could not have a
	// server of their own (Options.OwnServer failed): they ran alone on
	// the run's server instead.
	OwnServerError string `json:"own_server_error,omitempty"`
	// Provenance says where the run came from: the command line, the
	// program's version and commit, the Go version (set by the caller,
	// see harness.Build).
	Argv      []string `json:"argv,omitempty"`
	Version   string   `json:"version,omitempty"`
	Commit    string   `json:"commit,omitempty"`
	GoVersion string   `json:"go_version,omitempty"`
}

// CutShort says what a run cut short did not judge: why it stopped (an
// interrupt, or the harness's own limit, Stopped) and the scenarios that
// never ran; "" for a run that ran out. A report of such a run must say
// so, or its table reads as the whole run.
func (s *Summary) CutShort() string {
	if !s.Interrupted {
		return ""
	}
	line := "Interrupted"
	if s.Stopped != "" {
		line = "Stopped: " + s.Stopped
	}
	if len(s.NotRun) > 0 {
		line += ". Never ran: " + strings.Join(s.NotRun, ", ")
	}
	return line + "."
}

// WriteWidth is how many of the run's scenarios its files may be written
// for at once: as many as the machine has cores, but one when a history
// spilled to disk (history.History.Spilled), whose parts are loaded whole
// while they are written, so that two would hold two parts at once.
func (s *Summary) WriteWidth() int {
	for i := range s.Scenarios {
		if h := s.Scenarios[i].History(); h != nil && h.Spilled() {
			return 1
		}
	}
	return runtime.GOMAXPROCS(0)
}

// WhyUndecided says why a scenario run was left undecided: its error (an
// interrupt, a workload that could not finish, a fault the machine could
// not inject), every checker that could not decide, and its calls of
// unknown outcome with the first one's error (FirstUnknown: a server gone
// away is named). The run's summary and the mutants matrix say it alike.
func (s ScenarioResult) WhyUndecided() string {
	var why []string
	if s.Error != "" {
		why = append(why, s.Error)
	}
	for _, c := range s.Checkers {
		if c.Verdict == check.Unknown {
			why = append(why, c.Checker+": "+c.Detail)
		}
	}
	if len(why) == 0 {
		why = append(why, "no checker decided")
	}
	if n := s.Outcomes["unknown"]; n > 0 && s.FirstUnknown != "" {
		calls := "1 store call"
		if n != 1 {
			calls = fmt.Sprintf("%d store calls", n)
		}
		why = append(why, fmt.Sprintf("%s ended in an error that leaves the outcome unknown (the first: %s)", calls, clip.Bytes(s.FirstUnknown, 200)))
	}
	return strings.Join(why, "; ")
}
