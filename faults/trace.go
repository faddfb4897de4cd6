package faults

import (
	"context"
	"fmt"
	"unicode/utf8"
)

// RunBeforeBegin is the failpoint at the start of each attempt of a client,
// before it reads its clock for the request and calls Run: the controlled
// scheduler decides there when a client sends its request (and a request
// sent after the clock moved carries the new time).
const RunBeforeBegin = "run.before-begin"

// Tracer hears each statement a store runs (the SQL text, the script or
// command) and what it returned, in the order the caller ran them: the demo
// prints them step by step. Stores call Trace after each round trip.
type Tracer interface {
	Trace(ctx context.Context, stmt, result string)
}

type tracerKey struct{}

// WithTracer returns a context whose statements are reported to t. Each
// client of a harness gets its own, so the trace says who ran what.
func WithTracer(ctx context.Context, t Tracer) context.Context {
	return context.WithValue(ctx, tracerKey{}, t)
}

func tracerOf(ctx context.Context) Tracer {
	t, _ := ctx.Value(tracerKey{}).(Tracer)
	return t
}

// Tracing reports whether the context carries a Tracer, so a store can skip
// describing a result nobody will read.
func Tracing(ctx context.Context) bool { return tracerOf(ctx) != nil }

// Trace reports that the caller ran stmt and saw result: nothing happens
// unless the context carries a Tracer.
func Trace(ctx context.Context, stmt, result string) {
	if t := tracerOf(ctx); t != nil {
		t.Trace(ctx, stmt, result)
	}
}

// Tracef is Trace with the result formatted, only when someone listens.
func Tracef(ctx context.Context, stmt, format string, args ...any) {
	if t := tracerOf(ctx); t != nil {
		t.Trace(ctx, stmt, fmt.Sprintf(format, args...))
	}
}

// ShortToken shortens a fencing token for a trace: a long one to its first
// 8 characters and its last 4, a short token (a counter, a time in ms) in
// full. Both ends: a store whose tokens begin alike (a zero-padded fence
// number, then a random part) printed every token of a failing history as
// "00000000…", the stale owner's save and the new owner's claim alike.
func ShortToken(tok string) string {
	if len(tok) <= 16 {
		return tok
	}
	head, tail := 8, len(tok)-4
	for head > 0 && !utf8.RuneStart(tok[head]) { // whole characters only
		head--
	}
	for tail < len(tok) && !utf8.RuneStart(tok[tail]) {
		tail++
	}
	return tok[:head] + "…" + tok[tail:]
}
