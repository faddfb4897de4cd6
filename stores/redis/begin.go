package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
)

// Begin decides per the decision table, in one atomic script (the split
// mutants take two round trips).
func (s *Store) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	if err := stores.ValidateKey(req.KeyRef); err != nil {
		return stores.Decision{}, err
	}
	key := s.redisKey(req.KeyRef)
	req.Fingerprint = stores.StoredFingerprint(s.variant, req.Fingerprint)
	args := []any{req.Fingerprint, newToken(), s.lockTTL, s.retention, 0, req.Now.UnixMilli()}
	switch s.scripts.split {
	case selectThenInsert:
		return s.beginSelectThenInsert(ctx, key, args)
	case takeoverOnRead:
		return s.beginTakeoverOnRead(ctx, key, args)
	case existsThenClaim:
		n, err := s.rdb.Exists(ctx, key).Result()
		if err != nil {
			return stores.Decision{}, fmt.Errorf("redis: begin (exists): %w", err)
		}
		faults.Tracef(ctx, "EXISTS key", "%d", n)
		if n == 0 {
			return s.runBegin(ctx, s.scripts.second, key, args) // the upsert
		}
	}
	if s.lateAfter > 0 {
		return stores.BeginInTime(req.KeyRef, s.lateAfter, func() (stores.Decision, error) {
			return s.runBegin(ctx, s.scripts.begin, key, args)
		})
	}
	return s.runBegin(ctx, s.scripts.begin, key, args)
}

// beginSelectThenInsert is the classic bug: HGETALL in one call, then, if it
// saw no key, an unconditional claim in a second call. Two requests that
// both read before either writes both claim.
func (s *Store) beginSelectThenInsert(ctx context.Context, key string, args []any) (stores.Decision, error) {
	row, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		faults.Tracef(ctx, "HGETALL key", "error: %v", err)
		return stores.Decision{}, fmt.Errorf("redis: begin (select): %w", err)
	}
	if len(row) == 0 {
		faults.Trace(ctx, "HGETALL key", "(empty): no key")
	} else {
		faults.Tracef(ctx, "HGETALL key", "status=%s", row["status"])
	}
	if err := faults.Hit(ctx, faults.BeginAfterSelect); err != nil {
		return stores.Decision{}, err
	}
	if len(row) == 0 {
		return s.runBegin(ctx, s.scripts.second, key, args) // the upsert
	}
	return s.runBegin(ctx, s.scripts.begin, key, args)
}

// beginTakeoverOnRead re-creates blind-takeover and stale-overwrite: the
// first call judges staleness and, if stale, writes nothing; the second call
// writes without comparing the token judged stale.
func (s *Store) beginTakeoverOnRead(ctx context.Context, key string, args []any) (stores.Decision, error) {
	v, err := s.eval(ctx, s.scripts.begin, key, args...)
	if err != nil {
		return stores.Decision{}, err
	}
	rep, err := parseReply(v)
	if err != nil {
		return stores.Decision{}, err
	}
	if rep.code != "stale" {
		return rep.decision()
	}
	if err := faults.Hit(ctx, faults.BeginAfterSelect); err != nil {
		return stores.Decision{}, err
	}
	created, ok := rep.a.(int64)
	if !ok {
		return stores.Decision{}, fmt.Errorf("redis: begin: malformed stale reply %#v", v)
	}
	args[4] = created // created_at as read, for stale-overwrite's write-back
	return s.runBegin(ctx, s.scripts.second, key, args)
}

// runBegin runs a Begin script and turns its reply into a Decision.
func (s *Store) runBegin(ctx context.Context, sc *script, key string, args []any) (stores.Decision, error) {
	v, err := s.eval(ctx, sc, key, args...)
	if err != nil {
		return stores.Decision{}, err
	}
	rep, err := parseReply(v)
	if err != nil {
		return stores.Decision{}, err
	}
	return rep.decision()
}

// beginReply is a Begin script's reply: {code, now, a, b}.
type beginReply struct {
	code string
	now  int64
	a, b any
}

func parseReply(v any) (beginReply, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) < 2 {
		return beginReply{}, fmt.Errorf("redis: begin: unexpected reply %#v", v)
	}
	code, ok1 := arr[0].(string)
	now, ok2 := arr[1].(int64)
	if !ok1 || !ok2 {
		return beginReply{}, fmt.Errorf("redis: begin: unexpected reply %#v", v)
	}
	r := beginReply{code: code, now: now}
	if len(arr) > 2 {
		r.a = arr[2]
	}
	if len(arr) > 3 {
		r.b = arr[3]
	}
	return r, nil
}

func (r beginReply) decision() (stores.Decision, error) {
	d := stores.Decision{DecidedAt: time.UnixMilli(r.now)}
	bad := func() (stores.Decision, error) {
		return stores.Decision{}, fmt.Errorf("redis: begin: malformed %q reply (%#v, %#v)", r.code, r.a, r.b)
	}
	switch r.code {
	case "claimed":
		tok, ok1 := r.a.(string)
		takeover, ok2 := r.b.(int64)
		if !ok1 || !ok2 || tok == "" {
			return bad()
		}
		d.Outcome, d.Token, d.Takeover = stores.Claimed, stores.Token(tok), takeover == 1
	case "replay":
		st, ok1 := r.a.(string)
		body, ok2 := r.b.(string)
		code, err := strconv.Atoi(st)
		if !ok1 || !ok2 || err != nil {
			return bad()
		}
		d.Outcome, d.Response = stores.Replay, stores.Response{Status: code, Body: body}
	case "in_flight":
		d.Outcome = stores.InFlight
	case "mismatch":
		d.Outcome = stores.Mismatch
	default:
		return stores.Decision{}, fmt.Errorf("redis: begin: unknown reply code %q", r.code)
	}
	return d, nil
}
