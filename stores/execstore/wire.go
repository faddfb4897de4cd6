// Package execstore runs an idempotency-key store written in any language
// as a child process, and speaks to it in line-delimited JSON over its
// stdin and stdout (docs/protocol.md is the protocol's specification).
// Each Open starts one process: the store's hello declares what a Go
// backend declares in its stores.Backend (its clock, where it keeps its
// data, its semantics, its failpoints), every call of the contract is one
// request with an id, answered in any order, and the store's failpoints
// are hit messages that idemcheck answers when its scheduler lets the
// call go on (or kills the process there: a crash).
//
// Serve is the store's side of the protocol for a Go store: the
// conformance test of the protocol runs the memory store behind it in a
// real child process.
package execstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// Version is the protocol's version: a store's hello must name it.
const Version = 1

// Hello is the store's first line: who it is and what it declares.
type Hello struct {
	Type     string `json:"type"` // "hello"
	Protocol int    `json:"protocol"`
	// Name labels the store in reports.
	Name string `json:"name"`
	// Clock is "caller" (the store judges time by each request's now_ms)
	// or "server" (by its database's clock).
	Clock string `json:"clock"`
	// Lives is where the store keeps its data: "process" (in the store's
	// own memory: another process cannot share it), "file" (a file whose
	// path is the open request's addr) or "server" (a database server,
	// whose address is the open request's addr). Default "process".
	Lives string `json:"lives,omitempty"`
	// Server is the kind of server a "server" store needs: "redis" or
	// "postgres"; idemcheck starts one and gives its address.
	Server string `json:"server,omitempty"`
	// Semantics are the store's declarations beyond the contract, as
	// stores.Semantics declares them.
	Semantics stores.Semantics `json:"semantics"`
	// Fence: every claim's reply carries a fencing number that strictly
	// increases with every claim of a key (within each life of its record
	// when the semantics declare fence_restarts_per_life). A reply may
	// carry one without it; with it, a claim without one is a protocol
	// error.
	Fence bool `json:"fence,omitempty"`
	// Extend: the store answers extend requests (a heartbeat).
	Extend bool `json:"extend,omitempty"`
	// Show: the store answers show requests (a key's row on one line, for
	// a demo).
	Show bool `json:"show,omitempty"`
	// Points lists the failpoints the store hits (see Hit), besides which
	// the scheduler can interleave only between calls.
	Points []string `json:"points,omitempty"`
	// WaitsAnnounced: as stores.Backend.WaitsAnnounced, the store never
	// waits for another client without a hit first.
	WaitsAnnounced bool `json:"waits_announced,omitempty"`
	// Variants lists the store's bug variants besides "correct".
	Variants []string `json:"variants,omitempty"`
}

// validate reports a hello no run can use.
func (h Hello) validate() error {
	switch {
	case h.Type != "hello":
		return fmt.Errorf("the first line must be a hello, got type %q", h.Type)
	case h.Protocol != Version:
		return fmt.Errorf("hello: protocol %d, idemcheck speaks %d", h.Protocol, Version)
	case h.Name == "":
		return fmt.Errorf("hello: no name")
	case h.Clock != string(stores.CallerClock) && h.Clock != string(stores.ServerClock):
		return fmt.Errorf("hello: clock %q: want caller or server", h.Clock)
	}
	switch h.Lives {
	case "", string(stores.InProcess), string(stores.File):
		if h.Server != "" {
			return fmt.Errorf("hello: server %q for a store that lives in a %s", h.Server, h.lives())
		}
	case string(stores.Server):
		if h.Server != "redis" && h.Server != "postgres" {
			return fmt.Errorf("hello: server %q: want redis or postgres", h.Server)
		}
	default:
		return fmt.Errorf("hello: lives %q: want process, file or server", h.Lives)
	}
	for _, v := range h.Variants {
		if v == "" || strings.ContainsAny(v, " \t\n/") {
			return fmt.Errorf("hello: variant %q: a name without blanks or slashes", v)
		}
	}
	for _, p := range h.Points {
		if p == "" {
			return fmt.Errorf("hello: an empty failpoint name")
		}
	}
	return nil
}

func (h Hello) lives() stores.Location {
	if h.Lives == "" {
		return stores.InProcess
	}
	return stores.Location(h.Lives)
}

// Config is the open request's configuration: stores.Config on the wire.
type Config struct {
	LockTTLMs   float64 `json:"lock_ttl_ms"`
	RetentionMs float64 `json:"retention_ms"`
	Variant     string  `json:"variant"`
	Namespace   string  `json:"namespace"`
	// Addr is the data's address: a file path, a server's host:port or
	// DSN; "" for a store that lives in its process.
	Addr string `json:"addr"`
}

// toStore is a request (or a go) from idemcheck.
type toStore struct {
	Type  string  `json:"type"`
	ID    int64   `json:"id"`
	Trace bool    `json:"trace,omitempty"`
	Open  *Config `json:"config,omitempty"`
	// begin
	Request *wireRequest `json:"request,omitempty"`
	// complete, release, extend, show
	Key *stores.KeyRef `json:"key,omitempty"`
	// Token is set on complete, release and extend, and sent even when
	// empty (a forged or missing token in the abuse scenario): a store
	// that reads the field the protocol's table lists must find it there.
	Token    *string          `json:"token,omitempty"`
	Response *stores.Response `json:"response,omitempty"`
	// prune, extend
	NowMs *float64 `json:"now_ms,omitempty"`
}

type wireRequest struct {
	Key         stores.KeyRef `json:"key"`
	Fingerprint string        `json:"fingerprint"`
	NowMs       float64       `json:"now_ms"`
	LeaseMs     float64       `json:"lease_ms,omitempty"`
}

// fromStore is any line the store writes after its hello.
type fromStore struct {
	Type string `json:"type"`
	ID   *int64 `json:"id"`
	// ok
	Decision *wireDecision `json:"decision,omitempty"`
	Removed  *int          `json:"removed,omitempty"`
	Row      *string       `json:"row,omitempty"`
	// error
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// hit
	Point string `json:"point,omitempty"`
	// trace
	Step   string `json:"step,omitempty"`
	Result string `json:"result,omitempty"`
}

type wireDecision struct {
	Outcome     string           `json:"outcome"`
	Token       string           `json:"token,omitempty"`
	Fence       *uint64          `json:"fence,omitempty"`
	Takeover    bool             `json:"takeover,omitempty"`
	Response    *stores.Response `json:"response,omitempty"`
	DecidedAtMs *float64         `json:"decided_at_ms,omitempty"`
	// LeaseUntilMs is when a claim's lease runs out, if the store says
	// (stores.Decision.LeaseUntil).
	LeaseUntilMs *float64 `json:"lease_until_ms,omitempty"`
}

// Error codes of an error reply.
const (
	CodeFenced     = "fenced"
	CodeInvalidKey = "invalid-key"
	// CodeNotApplied: the store knows the call changed nothing (its
	// database rolled it back: stores.ErrNotApplied).
	CodeNotApplied = "not-applied"
	// CodeLost: a fault injector in front of the store lost its answer
	// (stores.ErrLost): an unknown outcome, counted as an injected fault.
	CodeLost  = "lost"
	CodeOther = "other"
)

var outcomes = map[string]stores.Outcome{
	"claimed": stores.Claimed, "replay": stores.Replay, "in-flight": stores.InFlight, "mismatch": stores.Mismatch,
}

// strict decodes one line into v, refusing unknown fields and trailing
// data: a store that writes what the protocol does not say is told so.
func strict(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON value on the line")
	}
	return nil
}

// check says what is wrong with a message from the store, or nil.
func (m *fromStore) check(h Hello) error {
	if m.ID == nil {
		return fmt.Errorf("no id")
	}
	switch m.Type {
	case "ok":
	case "error":
		if m.Code != CodeFenced && m.Code != CodeInvalidKey && m.Code != CodeNotApplied && m.Code != CodeLost && m.Code != CodeOther {
			return fmt.Errorf("error code %q: want fenced, invalid-key, not-applied, lost or other", m.Code)
		}
	case "hit":
		if !slices.Contains(h.Points, m.Point) {
			return fmt.Errorf("hit at %q, a failpoint the hello did not announce (points: %s)", m.Point, strings.Join(h.Points, ", "))
		}
	case "trace":
		if m.Step == "" {
			return fmt.Errorf("trace without a step")
		}
	default:
		return fmt.Errorf("unknown type %q (want ok, error, hit or trace)", m.Type)
	}
	return nil
}

// decision converts a begin's reply, given the request's clock reading.
func (d *wireDecision) decision(h Hello, now time.Time) (stores.Decision, error) {
	if d == nil {
		return stores.Decision{}, fmt.Errorf("ok to a begin without a decision")
	}
	o, ok := outcomes[d.Outcome]
	if !ok {
		return stores.Decision{}, fmt.Errorf("outcome %q: want claimed, replay, in-flight or mismatch", d.Outcome)
	}
	out := stores.Decision{Outcome: o, Takeover: d.Takeover, DecidedAt: now}
	if d.DecidedAtMs != nil {
		out.DecidedAt = fromMs(*d.DecidedAtMs)
	} else if h.Clock == string(stores.ServerClock) {
		return stores.Decision{}, fmt.Errorf("a server-clock store's decision needs decided_at_ms")
	}
	switch o {
	case stores.Claimed:
		if d.Token == "" {
			return stores.Decision{}, fmt.Errorf("claimed without a token")
		}
		out.Token = stores.Token(d.Token)
		switch {
		case d.Fence == nil && h.Fence:
			return stores.Decision{}, fmt.Errorf("claimed without a fence, which the hello declared")
		case d.Fence != nil && *d.Fence == 0:
			return stores.Decision{}, fmt.Errorf("fence 0: fencing numbers start at 1")
		case d.Fence != nil:
			out.Fence = *d.Fence
		}
		if d.LeaseUntilMs != nil {
			out.LeaseUntil = fromMs(*d.LeaseUntilMs)
		}
	case stores.Replay:
		if d.Response == nil {
			return stores.Decision{}, fmt.Errorf("replay without a response")
		}
		out.Response = *d.Response
	}
	return out, nil
}

// ms is a time as the wire carries it: milliseconds since the Unix epoch,
// with a fraction down to the microsecond (a float64 holds it exactly).
func ms(t time.Time) float64 { return float64(t.UnixMicro()) / 1000 }

func fromMs(v float64) time.Time { return time.UnixMicro(int64(math.Round(v * 1000))) }

func durMs(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func fromDurMs(v float64) time.Duration { return time.Duration(math.Round(v*1000)) * time.Microsecond }
