package stores

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// ClockSource says whose clock a backend judges staleness and retention by.
type ClockSource string

const (
	// CallerClock: the Request's Now (embedded stores on one host).
	CallerClock ClockSource = "caller"
	// ServerClock: the database server's clock, one for every client.
	ServerClock ClockSource = "server"
)

// Correct is the name of every backend's correct variant.
const Correct = "correct"

// Location says where a backend keeps its data. It decides what a harness
// can do to the data besides calling the store: share it with worker
// processes, put a network proxy in front of it, pause or restart it.
type Location string

const (
	// InProcess: the data lives in the store's own process (the memory
	// store) and dies with it; another process cannot open it.
	InProcess Location = "process"
	// File: the data is a file on this machine (SQLite); other processes
	// open the same file, and there is no network to fault.
	File Location = "file"
	// Server: the data lives in a server reached over the network
	// (Postgres, Redis): other processes connect to it, a proxy can sit in
	// front of it, and the server can be paused and restarted.
	Server Location = "server"
)

// Backend describes one store implementation and how to open it.
type Backend struct {
	Name  string
	Clock ClockSource
	// Lives says where the backend keeps its data: what Open's addr names
	// (nothing, a file path, a server address) and which faults apply.
	Lives Location
	// Failpoints lists the failpoints the backend's own operations pass
	// through, besides those of the Run flow (which every store passes):
	// for example faults.BeginBeforeCommit inside SQLite's Begin
	// transaction, where a process killed holds the file's write lock.
	Failpoints []string
	// Mutants lists the mutant variants this backend implements, by name
	// (see Mutants for what each re-creates).
	Mutants []string
	// WaitsAnnounced declares that, in every variant, a call never waits
	// for another client of the same Store without first passing
	// faults.Wait: the store holds no lock across a failpoint, or it
	// announces the wait (SQLite's writer turn), and its connection pool
	// is larger than any one scheduled episode's clients. A controlled
	// scheduler (harness/sched) then takes a client that has not reached
	// its next failpoint to be slow, not blocked, and waits for it, so a
	// loaded machine cannot change the interleaving a seed gives.
	WaitsAnnounced bool
	// Replicated, when set, names the server kind ("postgres", "redis")
	// of a backend whose server runs as a primary with one streaming
	// standby (docs/DESIGN.md, "Replicated stores"): the harness starts
	// that topology, routes the store's address to the current primary
	// and fails over to the standby, instead of starting one server.
	// Open's addr is then the harness's router, not a server.
	Replicated string
	// Semantics and Fence are what the backend declares beyond the
	// contract (see stores.Semantics and stores.Fence); zero: nothing.
	Semantics Semantics
	Fence     Fence
	// Statements: the backend's logic is statement or script texts, and
	// it passes each through Config.Statements at open, so `idemcheck
	// mutate` can generate mutants of it. False for backends whose
	// conditions are Go code (memory, lease).
	Statements bool
	// Equivalent argues, for each generated mutant (by its ID, as
	// `idemcheck mutate` prints it) that no client can tell from the
	// correct store, why: a conjunct another implies, a column no reader
	// reads. An argument is never inferred from survival: a mutant with
	// an argument that a checker kills is reported as a refuted argument.
	Equivalent map[string]string
	// Open connects to addr (a file path, DSN or host:port, as the backend
	// documents) and returns a store of cfg.Variant. An unknown variant is
	// an error.
	Open func(ctx context.Context, addr string, cfg Config) (Store, error)
}

// Variants lists the backend's variants: correct first, then its mutants.
func (b Backend) Variants() []string {
	return append([]string{Correct}, b.Mutants...)
}

// HasVariant reports whether the backend implements the named variant.
func (b Backend) HasVariant(name string) bool {
	return slices.Contains(b.Variants(), name)
}

var (
	registryMu sync.Mutex
	registry   = map[string]Backend{}
)

// Register adds a backend; backend packages call it from init.
func Register(b Backend) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[b.Name]; dup {
		panic("stores: backend registered twice: " + b.Name)
	}
	for _, m := range b.Mutants {
		if _, ok := Mutants[m]; !ok {
			panic("stores: backend " + b.Name + " registers undocumented mutant " + m)
		}
	}
	registry[b.Name] = b
}

// Lookup returns the named backend.
func Lookup(name string) (Backend, error) {
	registryMu.Lock()
	defer registryMu.Unlock()
	b, ok := registry[name]
	if !ok {
		return Backend{}, fmt.Errorf("unknown store %q (known: %s)", name, strings.Join(backendNamesLocked(), ", "))
	}
	return b, nil
}

// Backends lists the registered backend names, sorted.
func Backends() []string {
	registryMu.Lock()
	defer registryMu.Unlock()
	return backendNamesLocked()
}

func backendNamesLocked() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Mutant documents one re-created classic bug.
type Mutant struct {
	Name string
	// Bug is one line on the bug it re-creates.
	Bug string
	// Scenario is the scenario meant to kill it: a scheduled one
	// (harness/scenario/sched.go) where the bug needs an interleaving, which
	// kills it on every backend in a few episodes whatever the seed.
	Scenario string
	// Strict: the bug shows only as a finding (a key kept past its
	// retention), which a hunt counts as a kill only in strict mode.
	Strict bool
}

// Mutants is every store-side mutant, by name. Backends implement them
// beside their correct code.
var Mutants = map[string]Mutant{
	"select-then-insert":           {"select-then-insert", "reads the key, then inserts in a second statement: two concurrent requests both see none and both run", "sched-race", false},
	"unfenced-complete":            {"unfenced-complete", "saves the response without checking the token: a stale owner overwrites the new owner's answer", "sched-takeover", false},
	"unfenced-release":             {"unfenced-release", "deletes the claim without checking the token: a stale owner deletes the new owner's claim", "sched-takeover", false},
	"no-fingerprint":               {"no-fingerprint", "ignores the fingerprint: a reused key with other parameters replays the wrong answer", "sched-mismatch", false},
	"blind-takeover":               {"blind-takeover", "takes over a stale claim without compare-and-set: two takers both win", "sched-crash", false},
	"token-reuse":                  {"token-reuse", "uses locked_at as the fencing token (the card's scheme): a token comes back after release and a stale save lands", "sched-takeover", false},
	"no-takeover":                  {"no-takeover", "never recovers a stale claim: a crashed owner's key is stuck in flight forever", "sched-crash", false},
	"short-retention":              {"short-retention", "prunes keys younger than the retention window: a retry inside the window runs again", "sched-retention", false},
	"stale-overwrite":              {"stale-overwrite", "decides a takeover on a stale read and overwrites a record that was finished meanwhile", "sched-takeover", false},
	"case-folded-key":              {"case-folded-key", "compares keys case-insensitively: two operations whose keys differ only in case share one record, and the second is refused or replayed the first one's answer", "key-space", false},
	"tenant-blind":                 {"tenant-blind", "looks keys up without their tenant: two customers using the same key name share one record", "key-space", false},
	"complete-overwrites-done":     {"complete-overwrites-done", "saves a response without checking that the key is still in flight: a save sent twice (a retried request) overwrites the answer already replayed to others", "abuse", false},
	"release-deletes-done":         {"release-deletes-done", "deletes a claim without checking that the key is still in flight: a release in a defer, after the save, deletes the saved answer and a retry runs the work again", "abuse", false},
	"prune-sweeps-in-flight":       {"prune-sweeps-in-flight", "prunes in-flight claims whatever their age (a cleanup of \"abandoned\" claims): a live owner's claim vanishes and another client claims the key while it works", "sched-race", false},
	"split-claim":                  {"split-claim", "asks EXISTS, then claims with a second command when the key was absent (a get-then-set a team writes without a failpoint between): two requests both see no key and both run", "sched-race", false},
	"fence-not-incremented":        {"fence-not-incremented", "takes a stale claim over with a new owner but the old fencing number: downstream systems that fence by the number let the old owner's writes through", "sched-takeover", false},
	"takeover-ignores-fingerprint": {"takeover-ignores-fingerprint", "takes over a stale claim without comparing the fingerprint: a request with other parameters, arriving once the owner's claim went stale, runs instead of getting 422", "sched-mismatch", false},
	"never-expire":                 {"never-expire", "never lets a key go: Prune removes nothing, so keys outlive their retention (a leak, and a reused key never becomes new)", "retention", true},
	// A configuration mutant: the Redis store's scripts are correct, its
	// server runs without persistence (see ConfigMutants).
	"redis-no-persistence": {"redis-no-persistence", "runs Redis without persistence (no AOF, no snapshots): a server restart forgets acknowledged claims and saved answers, and retries run the work again", "store-faults", false},
	// Configuration mutants of the replicated backends: the stores' code
	// is correct, their replication is asynchronous (see ConfigMutants).
	"postgres-async-replication": {"postgres-async-replication", "commits with synchronous_commit = local on a primary with a standby: a commit is acknowledged before the standby has it, and a failover to that standby forgets acknowledged claims and answers, so retries run the work again", "failover", false},
	"redis-async-replication":    {"redis-async-replication", "answers without WAIT on a primary with a replica (Redis's default asynchronous replication): a reply is sent before the replica has what it says, and a failover to that replica forgets acknowledged claims and answers, so retries run the work again", "failover", false},
}

// ConfigMutants maps each configuration mutant to the one backend it
// applies to: the store's code is correct, the deployment it needs is not.
// Store-side mutants, which every backend implements, are not in it.
var ConfigMutants = map[string]string{
	"redis-no-persistence":       "redis",
	"postgres-async-replication": "postgres-replicated",
	"redis-async-replication":    "redis-replicated",
}

// OnlyOn maps each store-side mutant that only one backend implements to
// that backend: a bug of that backend's protocol (several commands where
// one script belongs), with no counterpart in the others.
var OnlyOn = map[string]string{
	"split-claim":           "redis",
	"fence-not-incremented": "lease",
}

// MutantNames lists the store-side mutants, sorted: those every backend
// implements (configuration mutants, in ConfigMutants, and those in OnlyOn
// belong to one backend and are listed by its Backend.Mutants only).
func MutantNames() []string {
	names := make([]string, 0, len(Mutants))
	for n := range Mutants {
		_, config := ConfigMutants[n]
		_, only := OnlyOn[n]
		if config || only {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
