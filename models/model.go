// Package models holds the sequential specification of one idempotency key:
// the decision table of docs/DESIGN.md §1 as a pure function of state and input,
// and a porcupine model built on it for checking concurrent histories.
package models

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
)

// Kind is the store operation an Input stands for.
type Kind int

// The operations of the contract that change or read a key.
const (
	Begin Kind = iota + 1
	Complete
	Release
	// Prune is the store-wide Prune call, copied into every key's history:
	// keys older than the retention at its time may vanish.
	Prune
	// Extend renews a claim's lease under its token (a heartbeat), for
	// stores that implement stores.Extender.
	Extend
)

// String names the operation.
func (k Kind) String() string {
	switch k {
	case Begin:
		return "Begin"
	case Complete:
		return "Complete"
	case Release:
		return "Release"
	case Prune:
		return "Prune"
	case Extend:
		return "Extend"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Input is one call on one key, as the history recorded it.
type Input struct {
	Kind        Kind            `json:"kind"`
	Key         stores.KeyRef   `json:"key"`
	Fingerprint string          `json:"fingerprint,omitempty"` // Begin
	Token       stores.Token    `json:"token,omitempty"`       // Complete, Release
	Response    stores.Response `json:"response"`              // Complete
	// Now is the caller's clock at the call: the Request's Now for Begin,
	// and the best estimate of the store's time for Complete and Release.
	Now time.Time `json:"now"`
	// ID names the call uniquely in its history.
	ID int `json:"id"`
	// Lease is a Begin's own lease (stores.Request.Lease; 0: the store's
	// LockTTL).
	Lease time.Duration `json:"lease,omitempty"`
	// Called is an Extend's call time on the caller's clock: the lease it
	// renews starts no earlier (Now, after the call, is the latest).
	Called time.Time `json:"called,omitempty"`
	// Sent is a Begin's send time on the caller's clock (zero: not
	// recorded). A caller-clock store decides by Now, stamped by the
	// client before it sent the request: a claim sent late (a client not
	// scheduled on a loaded machine) is already Sent-Now old when the
	// store makes it, and its lease that much shorter. The model ignores
	// it; the exclusive-execution checker counts that age as lease lost.
	Sent time.Time `json:"sent,omitempty"`
}

// Output is what the call returned. Unknown means no answer came back
// (timeout, lost reply, crash): the call may or may not have taken effect.
// NotApplied means the store answered with an error it declares a
// definite no-op (stores.ErrNotApplied): the call certainly changed
// nothing, and carries no decision.
type Output struct {
	Unknown    bool            `json:"unknown,omitempty"`
	Decision   stores.Decision `json:"decision"` // Begin
	Fenced     bool            `json:"fenced,omitempty"`
	NotApplied bool            `json:"not_applied,omitempty"`
}

// Decided reports whether the store answered the call with its decision:
// neither unknown nor declared not applied. Only a decided call's
// Decision and Fenced say anything.
func (o Output) Decided() bool { return !o.Unknown && !o.NotApplied }

// Config holds the contract's parameters the model judges by.
type Config struct {
	LockTTL   time.Duration
	Retention time.Duration
	// Slack widens the LockTTL and retention boundaries by this much either
	// way, for stores whose clocks are coarser than the history's.
	Slack time.Duration
	// Semantics are the choices the store declares where the contract lets
	// it choose (stores.Semantics): the model allows what they allow.
	Semantics stores.Semantics
	// Clock is whose clock the store declares it decides by
	// (stores.ServerClock or stores.CallerClock; empty reads as the
	// caller's). A server-clock store must not judge staleness by the
	// request's Now, so a takeover its own clock cannot have allowed is its
	// fault, whatever the taker's clock said (the exclusive-execution
	// checker); a caller-clock store's takeover by a client whose clock
	// ran ahead is the contract's cost of caller clocks.
	Clock stores.ClockSource
}

// LatestEnd is how long after its lock a claim of this lease may still
// be in flight: the lease and the Slack, and for a store whose clock
// counts in steps (stores.Semantics.ClockStep) the lease rounded up to a
// whole step and a step more (lock and now both read to the step, the
// claim stale once they are more than the rounded lease apart). Only the
// late side widens by the step: a claim never goes stale before its
// lease less the Slack.
func (cfg Config) LatestEnd(lease time.Duration) time.Duration {
	if st := cfg.Semantics.ClockStep; st > 0 {
		lease = (lease+st-1)/st*st + st
	}
	return lease + cfg.Slack
}

// lease is the lease of the state's claim: its own, or the LockTTL.
func (cfg Config) lease(s State) time.Duration { return cfg.LeaseOf(s.Lease) }

// LeaseOf is the lease of a claim whose request asked for requested: that,
// or the LockTTL when it asked for none.
func (cfg Config) LeaseOf(requested time.Duration) time.Duration {
	if requested > 0 {
		return requested
	}
	return cfg.LockTTL
}

// State is one key's record, or its absence. Used lists every token ever
// handed out for the key (sorted, comma-joined), so a repeat is caught.
type State struct {
	Exists      bool
	Fingerprint string
	Done        bool
	Response    stores.Response
	LockedAt    time.Time
	CreatedAt   time.Time
	Token       stores.Token
	Used        string
	// LockUncertain marks a claim whose call never answered: it took effect
	// at some moment after its call (a frozen server, a killed worker), so
	// LockedAt (the call's time) is only a lower bound and staleness is
	// undecided from LockTTL on. An extended lease is uncertain the same
	// way (the extension took effect during its call).
	LockUncertain bool
	// Lease is the claim's lease when the request chose one (0: LockTTL).
	Lease time.Duration
	// Tombstone marks a released key whose record a store that declares
	// ReleaseKeepsFingerprint keeps: no owner, but the fingerprint, until
	// the retention ends.
	Tombstone bool
}

// usedToken reports whether t was handed out before for this key.
func (s State) usedToken(t stores.Token) bool {
	if s.Used == "" {
		return false
	}
	for _, u := range strings.Split(s.Used, ",") {
		if u == string(t) {
			return true
		}
	}
	return false
}

func (s State) withToken(t stores.Token) string {
	var list []string
	if s.Used != "" {
		list = strings.Split(s.Used, ",")
	}
	list = append(list, string(t))
	sort.Strings(list)
	return strings.Join(list, ",")
}

// Expected is what the decision table says Begin must answer in a state.
type Expected struct {
	Outcome  stores.Outcome
	Takeover bool
	Response stores.Response
	// Ambiguous is set when the in-flight claim is at the LockTTL boundary
	// (within Slack) or its lock time is uncertain: then both InFlight and
	// a takeover are right.
	Ambiguous bool
	// EitherClaim: a claim may say takeover or not (a tombstone reclaimed).
	EitherClaim bool
}

// Decide is the decision table as a pure function: the outcome Begin must
// return for a request with this fingerprint at time now.
func Decide(cfg Config, s State, fingerprint string, now time.Time) Expected {
	switch {
	case !s.Exists:
		return Expected{Outcome: stores.Claimed}
	case s.Fingerprint != fingerprint:
		return Expected{Outcome: stores.Mismatch}
	case s.Tombstone:
		return Expected{Outcome: stores.Claimed, EitherClaim: true}
	case s.Done:
		return Expected{Outcome: stores.Replay, Response: s.Response}
	}
	age, lease := now.Sub(s.LockedAt), cfg.lease(s)
	if age < lease-cfg.Slack {
		return Expected{Outcome: stores.InFlight}
	}
	return Expected{Outcome: stores.Claimed, Takeover: true, Ambiguous: age < cfg.LatestEnd(lease) || s.LockUncertain}
}

// mayBeExpired reports whether retention allows the record to be gone at now.
func (cfg Config) mayBeExpired(s State, now time.Time) bool {
	return s.Exists && cfg.PastRetention(s.CreatedAt, now)
}

// PastRetention reports whether retention allows a record created at
// created to be gone at now (a Prune, or the store's own expiry, may have
// removed it): the model's one retention boundary, Slack included.
func (cfg Config) PastRetention(created, now time.Time) bool {
	return now.Sub(created) >= cfg.Retention-cfg.Slack
}

// beforeOp lists the states a key may be in when an operation at time now
// takes effect: as it was, or, once old enough, pruned (retention is
// allowed to remove it at any moment after that).
func (cfg Config) beforeOp(s State, now time.Time) []State {
	if cfg.mayBeExpired(s, now) {
		gone := State{Used: s.Used}
		return []State{s, gone}
	}
	return []State{s}
}

// Step returns every state the key may be in after the operation, given what
// it returned; none means the output is impossible: a violation. A call
// the store declared not applied is the identity: it is as if it had
// never been made (retention may still act at the next call's time).
func Step(cfg Config, s State, in Input, out Output) []State {
	if out.NotApplied {
		return []State{s}
	}
	var next []State
	for _, pre := range cfg.beforeOp(s, OpTime(in, out)) {
		next = append(next, step(cfg, pre, in, out)...)
	}
	return next
}

// OpTime is the time the model judges an operation at: a Begin's
// DecidedAt when it answered with one, else the input's Now.
func OpTime(in Input, out Output) time.Time {
	if in.Kind == Begin && !out.Unknown && !out.Decision.DecidedAt.IsZero() {
		return out.Decision.DecidedAt
	}
	return in.Now
}

func step(cfg Config, s State, in Input, out Output) []State {
	switch in.Kind {
	case Prune:
		return []State{s}
	case Begin:
		return stepBegin(cfg, s, in, out)
	case Complete, Release, Extend:
		held := heldBy(s, in.Token)
		// A store whose ownership ends with the lease may fence its owner
		// once the lease may be over, though nobody took over.
		ended := held && cfg.Semantics.LeaseBoundWrites && in.Now.Sub(s.LockedAt) >= cfg.lease(s)-cfg.Slack
		after := s
		switch in.Kind {
		case Complete:
			after.Done, after.Response = true, in.Response
		case Release:
			after = State{Used: s.Used}
			if cfg.Semantics.ReleaseKeepsFingerprint {
				after = State{Exists: true, Tombstone: true, Fingerprint: s.Fingerprint, CreatedAt: s.CreatedAt, Used: s.Used}
			}
		case Extend:
			after.LockedAt, after.LockUncertain = in.Called, true
			if in.Called.IsZero() {
				after.LockedAt = in.Now
			}
		}
		switch {
		case out.Unknown && held:
			return []State{s, after}
		case out.Unknown:
			return []State{s}
		case out.Fenced && (!held || ended):
			return []State{s}
		case !out.Fenced && held:
			return []State{after}
		case !out.Fenced && in.Kind == Release && cfg.Semantics.QuietRelease:
			return []State{s} // not the owner's, answered ok, and nothing changed
		}
		return nil
	}
	return nil
}

func stepBegin(cfg Config, s State, in Input, out Output) []State {
	if out.Unknown {
		return unknownBegin(cfg, s, in)
	}
	d := out.Decision
	exp := Decide(cfg, s, in.Fingerprint, d.DecidedAt)
	switch d.Outcome {
	case stores.Claimed:
		if exp.Outcome != stores.Claimed || (exp.Takeover != d.Takeover && !exp.EitherClaim) {
			return nil
		}
		if d.Token == "" || s.usedToken(d.Token) {
			return nil // tokens must never repeat for a key
		}
		n := State{Exists: true, Fingerprint: in.Fingerprint, LockedAt: d.DecidedAt,
			CreatedAt: d.DecidedAt, Token: d.Token, Used: s.withToken(d.Token), Lease: in.Lease}
		if s.Exists { // a takeover, or a tombstone reclaimed: retention runs from the first claim
			n.CreatedAt = s.CreatedAt
		}
		return []State{n}
	case stores.InFlight:
		if exp.Outcome == stores.InFlight || exp.Ambiguous {
			return []State{s}
		}
	case stores.Replay:
		if exp.Outcome == stores.Replay && d.Response == exp.Response {
			return []State{s}
		}
	case stores.Mismatch:
		if exp.Outcome == stores.Mismatch {
			return []State{s}
		}
	}
	return nil
}

// Placeholder is the token of a claim an unanswered Begin may have made:
// nobody saw its token, so no save, release or extension can carry it,
// and every such claim's token is the same placeholder, not recorded
// among the key's used tokens. Two unanswered Begins that claimed then
// leave the same state when nothing else tells them apart (their
// fingerprint, lease and lock time), which lets porcupine's cache merge
// them, and the checker merge the calls (docs/DESIGN.md §8). No call
// holds it ([heldBy]), whatever token it sends: it was "?", which abuse
// sends among its forged tokens, and a correct store that fenced such a
// save broke the model. It starts with a NUL byte, which no store hands
// out (Postgres text cannot hold one), so no claim's token is taken for
// it either.
const Placeholder stores.Token = "\x00unseen"

// unknownBegin: the call may have done nothing, or claimed (afresh or by
// takeover) with a token nobody saw (Placeholder).
func unknownBegin(cfg Config, s State, in Input) []State {
	out := []State{s}
	if s.Exists && (s.Done || s.Fingerprint != in.Fingerprint) {
		return out
	}
	at := UnansweredAt(in.Now)
	n := State{Exists: true, Fingerprint: in.Fingerprint, LockedAt: at, CreatedAt: at,
		Token: Placeholder, Used: s.Used, LockUncertain: true, Lease: in.Lease}
	if s.Exists {
		n.CreatedAt = s.CreatedAt
	}
	return append(out, n)
}

// RequestClockGrain is how much earlier than a request's Now (the
// harness's clock, to the nanosecond) a store may have read that time: the
// exec protocol carries now_ms to the microsecond, and a store may keep
// whole milliseconds. An answered Begin carries the store's own reading
// (stores.Decision.DecidedAt), which the model judges by; an unanswered
// one has none, so its claim's lock and creation times are placed this
// much before its Now (a lower bound, as LockUncertain says). Measured: a
// JavaScript store behind a link that lost one reply in twenty took over,
// at exactly LockTTL by its own microsecond clock, a claim whose reply
// was lost; the model, which had placed that claim at its nanosecond Now
// (418 ns later), failed a correct store's linearizability.
const RequestClockGrain = time.Millisecond

// UnansweredAt is the lock and creation time the model gives the claim an
// unanswered Begin asked at now may have made: now less
// RequestClockGrain. Every judgement of such a claim's times (the model's,
// and the checkers' that reason about it) goes through it.
func UnansweredAt(now time.Time) time.Time { return now.Add(-RequestClockGrain) }

// Equal compares two states.
func Equal(a, b State) bool { return a == b }

// Hash hashes a state consistently with Equal.
// It appends the fields to a stack buffer rather than formatting them
// (fmt made hashing a large part of checking a long history).
func Hash(s State) uint64 {
	var buf [256]byte
	b := buf[:0]
	str := func(v string) { b = append(strconv.AppendInt(b, int64(len(v)), 10), ':'); b = append(b, v...) }
	num := func(v int64) { b = append(strconv.AppendInt(b, v, 10), '|') }
	flag := func(v bool) { b = append(strconv.AppendBool(b, v), '|') }
	flag(s.Exists)
	str(s.Fingerprint)
	flag(s.Done)
	num(int64(s.Response.Status))
	str(s.Response.Body)
	num(s.LockedAt.UnixNano())
	num(s.CreatedAt.UnixNano())
	str(string(s.Token))
	str(s.Used)
	flag(s.LockUncertain)
	num(int64(s.Lease))
	flag(s.Tombstone)
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// heldBy reports whether the key is in flight under tok: the only state
// in which a save, release or extension with tok may land.
func heldBy(s State, tok stores.Token) bool {
	return s.Exists && !s.Done && !s.Tombstone && s.Token == tok && s.Token != Placeholder
}

// Hint names the declaration (stores.Semantics) that would allow an
// answer the model forbids in state s, when one would: a store built that
// way on purpose learns what to declare, not only that it failed. Empty
// when no declaration explains the answer.
func Hint(cfg Config, s State, in Input, out Output) string {
	if in.Kind == Release && !out.Unknown && !out.Fenced && !heldBy(s, in.Token) && !cfg.Semantics.QuietRelease {
		return "a Release that was not the owner's answered ok instead of fenced: if your store answers ok to a release " +
			"that changes nothing (the lesson card's \"0 rows changed: leave it\") and never deletes another's claim, " +
			"declare stores.Semantics{QuietRelease: true}"
	}
	return ""
}

// DescribeState prints a state for traces and the visualisation.
func DescribeState(s State) string {
	if !s.Exists {
		return "no row"
	}
	if s.Tombstone {
		return fmt.Sprintf("released, fp=%s kept", s.Fingerprint)
	}
	if s.Done {
		return fmt.Sprintf("done fp=%s resp=%d %q", s.Fingerprint, s.Response.Status, short(s.Response.Body))
	}
	tok := faults.ShortToken(string(s.Token))
	if s.Token == Placeholder {
		tok = "(unseen)"
	}
	return fmt.Sprintf("in_flight fp=%s token=%s locked_at=%s", s.Fingerprint, tok, s.LockedAt.Format("15:04:05.000"))
}

// DescribeOperation prints a call and its answer for traces.
func DescribeOperation(in Input, out Output) string {
	var call string
	switch in.Kind {
	case Begin:
		call = fmt.Sprintf("Begin(fp=%s)", in.Fingerprint)
	case Complete:
		call = fmt.Sprintf("Complete(token=%s, %d %q)", faults.ShortToken(string(in.Token)), in.Response.Status, short(in.Response.Body))
	case Release:
		call = fmt.Sprintf("Release(token=%s)", faults.ShortToken(string(in.Token)))
	case Extend:
		call = fmt.Sprintf("Extend(token=%s)", faults.ShortToken(string(in.Token)))
	case Prune:
		return fmt.Sprintf("Prune(now=%s)", in.Now.Format("15:04:05.000"))
	}
	switch {
	case out.Unknown:
		return call + " → ?"
	case out.NotApplied:
		return call + " → not applied"
	case in.Kind != Begin && out.Fenced:
		return call + " → fenced"
	case in.Kind != Begin:
		return call + " → ok"
	}
	d := out.Decision
	switch d.Outcome {
	case stores.Claimed:
		tk := ""
		if d.Takeover {
			tk = " (takeover)"
		}
		return fmt.Sprintf("%s → claimed token=%s%s", call, faults.ShortToken(string(d.Token)), tk)
	case stores.Replay:
		return fmt.Sprintf("%s → replay %d %q", call, d.Response.Status, short(d.Response.Body))
	}
	return fmt.Sprintf("%s → %s", call, d.Outcome)
}

func short(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}
