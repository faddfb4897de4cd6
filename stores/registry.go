package stores

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
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
	// Mutants lists the mutant variants this backend implements, by name:
	// MutantsOn(Name), its rows of Catalogue (Register checks it).
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
	// CallWall and FaultWall forecast what a run costs on this backend, for
	// estimates and the random-flag soak's budget only: the wall time one
	// store call takes inside a scenario, and what a scenario that pauses
	// and restarts the backend's server pays for it besides. Measured on a
	// 2-core machine beside one CPU hog (docs/performance.md, "Forecasts");
	// zero CallWall: DefaultCallWall.
	CallWall, FaultWall time.Duration
	// Open connects to addr (a file path, DSN or host:port, as the backend
	// documents) and returns a store of cfg.Variant. An unknown variant is
	// an error.
	Open func(ctx context.Context, addr string, cfg Config) (Store, error)
}

// DefaultCallWall is the forecast wall time of one call on a backend that
// does not say (Backend.CallWall): a store behind a local server or a
// child process.
const DefaultCallWall = 2 * time.Millisecond

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
	if want := MutantsOn(b.Name); !slices.Equal(b.Mutants, want) {
		panic(fmt.Sprintf("stores: backend %s registers the mutants %v, but the catalogue has %v for it", b.Name, b.Mutants, want))
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
