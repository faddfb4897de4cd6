package postgres

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemcheck/idemcheck/stores"
)

// schemaSQL creates the namespace's schema, table and index. New runs it in
// one transaction under an advisory lock (see ensureSchema), because
// concurrent CREATE … IF NOT EXISTS can still fail on the catalog's unique
// index. {s} is the quoted schema, {t} the quoted table.
//
// Tenant, key, fingerprint and response body are bytea: a Go string is any
// bytes, and text would refuse \x00 and invalid UTF-8 (or, worse, a client
// encoding could alter them), so replays would not be byte-for-byte.
const schemaSQL = `
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {t} (
    tenant          bytea       NOT NULL CHECK (octet_length(tenant) <= 255),
    key             bytea       NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 255),
    fingerprint     bytea       NOT NULL,
    status          text        NOT NULL CHECK (status IN ('in_flight', 'done')),
    response_status integer,
    response_body   bytea,
    locked_at       timestamptz NOT NULL,  -- server clock, when the current owner claimed
    token           text        NOT NULL,  -- fencing token: a random 128-bit owner id
    created_at      timestamptz NOT NULL,  -- server clock, first claim: retention counts from here
    decision        text        NOT NULL,  -- the latest Begin's outcome, so RETURNING can report it
    PRIMARY KEY (tenant, key)
);
CREATE INDEX IF NOT EXISTS idempotency_keys_created_at ON {t} (created_at);
`

// replaySQL is Begin's read: the row, as of the statement's snapshot,
// judged by the decision table's read-only arms, with the same holes as
// beginSQL ({mismatch}, {live}: a mutant's judgement is kept on both
// paths). When the row holds another fingerprint the answer is Mismatch;
// when it is done, Replay with its response; when it is a live claim,
// InFlight; each with no token and the server's clock, read once (n) as
// beginSQL reads it. Nothing is written (no row version, no WAL record,
// no transaction id). Each of these answers leaves the key as it was, and
// the snapshot is a committed state the key was in during the call, so
// the decision is linearized at the snapshot: the table gives that answer
// in that state, at the clock read after it (a claim live at the clock
// was live at the snapshot too, the lock only ages), and a commit after
// the snapshot (a save, a release, a Prune) is ordered after the call. A
// done row is final (Complete and Release act only on in-flight rows, a
// takeover only on a stale in-flight one; only Prune deletes it); a live
// claim may end right after the read, which is why the answer is placed
// at the snapshot and not later. No row returned (no row, or a stale
// claim of the same fingerprint: a claim or a takeover, which write)
// means nothing was decided, and claimSQL or beginSQL decides. excluded
// names the request's fingerprint as beginSQL's conflict arm names it, so
// that the {mismatch} hole reads the same in both.
const replaySQL = `
SELECT d.decision, ''::text,
       CASE d.decision WHEN 'replay' THEN k.response_status END,
       CASE d.decision WHEN 'replay' THEN k.response_body END, n.clock
FROM {t} AS k,
     (SELECT clock_timestamp() AS clock, $4::interval AS ttl, $5::timestamptz AS asked) AS n,
     (SELECT $3::bytea AS fingerprint) AS excluded,
     LATERAL (SELECT CASE
        WHEN {mismatch} THEN 'mismatch'
        WHEN k.status = 'done' THEN 'replay'
        WHEN {live} THEN 'in_flight'
     END AS decision) AS d
WHERE k.tenant = $1 AND k.key = $2 AND d.decision IS NOT NULL`

// beginSQL is Begin's decision when replaySQL found no answer, in one
// statement: it claims the key, or locks the row that is there and applies
// the decision table to it.
//
// INSERT … ON CONFLICT DO UPDATE waits for a concurrent inserter to finish,
// then locks the conflicting row and evaluates the SET against its latest
// committed version, even one the statement's snapshot cannot see. So the
// loser of a race always gets the winner's row back, never an empty answer
// (a SELECT beside INSERT … ON CONFLICT DO NOTHING would read the snapshot
// and may see no row at all). The update always happens: when nothing
// changes hands it writes the row back as it was, with the decision.
// RETURNING sees only the new row (before Postgres 18), which is why the
// decision is stored in the row.
//
// Parameters: $1 tenant, $2 key, $3 fingerprint, $4 LockTTL, $5 the
// request's Now (never judged by: the time is the server's; n.asked is
// there for request-clock, which judges by it). The CTE n reads the
// server's clock once (the time the decision is made with, returned as
// decided_at) and makes the token a new claim would get. It is read before
// any wait for the row lock, so after a long wait a claim is judged by a
// slightly earlier time: it can look younger than it is, never older, and
// a claim made during the wait (locked_at after the clock) is live.
// Holes in braces are filled from statements; each mutant of the
// one-statement decision changes one of them.
const beginSQL = `
WITH n AS MATERIALIZED (
    SELECT clock_timestamp() AS clock, {fresh} AS token, $4::interval AS ttl, $5::timestamptz AS asked),
w AS (
INSERT INTO {t} AS k (tenant, key, fingerprint, status, locked_at, token, created_at, decision)
SELECT $1, $2, $3, 'in_flight', n.clock, n.token, n.clock, 'claimed' FROM n
ON CONFLICT (tenant, key) DO UPDATE SET (decision, locked_at, token) = (
    SELECT d.decision,
           CASE d.decision WHEN 'takeover' THEN n.clock ELSE k.locked_at END,
           CASE d.decision WHEN 'takeover' THEN {next} ELSE k.token END
    FROM n, LATERAL (SELECT CASE
        WHEN {mismatch} THEN 'mismatch'
        WHEN k.status = 'done' THEN 'replay'
        WHEN {live} THEN 'in_flight'
        ELSE 'takeover' -- compare-and-set: the row is locked, the check and the write are one step
    END AS decision) AS d)
RETURNING k.decision, k.token, k.response_status, k.response_body)
SELECT decision, token, response_status, response_body, (SELECT clock FROM n) FROM w`

// claimSQL is Begin's claim when replaySQL found no answer: one INSERT
// that adds the key's row in flight and returns it, decision 'claimed'
// and the server's clock (locked_at) as decided_at. When the key has a
// row, it inserts nothing and returns no row, and beginSQL decides on the
// row that is there. The primary key decides between concurrent claims:
// the check for a conflicting row waits for a concurrent inserter to
// commit or abort, so at most one of them gets a row back, and the others
// go on to beginSQL, which sees the winner's row. It is beginSQL's claim
// arm without the CTEs and the conflict arm, which a claim does not run
// but would pay for: a claim is the one Begin that must write. Sent
// alone, it is the first statement of a Begin on a key the Store has not
// seen (see Store.begin): a new key's claim is then this one INSERT,
// without the read and the function call. On a key that has a row it
// changes nothing: the row keeps its version (TestReplayOnlyReads). $1
// tenant, $2 key, $3 fingerprint; {fresh} is the token, as in beginSQL.
const claimSQL = `
INSERT INTO {t} AS k (tenant, key, fingerprint, status, locked_at, token, created_at, decision)
SELECT $1, $2, $3, 'in_flight', n.clock, n.token, n.clock, 'claimed'
FROM (SELECT clock_timestamp() AS clock, {fresh} AS token) AS n
ON CONFLICT (tenant, key) DO NOTHING
RETURNING k.decision, k.token, k.response_status, k.response_body, k.locked_at`

// beginFuncSQL makes Begin's function: replaySQL; only when it finds
// nothing, claimSQL; only when that inserts nothing, beginSQL. One round
// trip, and each decision is still made by one statement: the read alone
// for a replay, the insert alone for a claim, the atomic upsert for all
// else (a statement that decided nothing changed no row). Two round trips
// would halve a claim's rate; one statement doing all (the read as a
// CTE, the INSERT's SELECT yielding no row when it found the answer)
// costs a replay the upsert's start-up, since INSERT … ON CONFLICT opens
// the table and both indexes and prepares its conflict arm even when
// given no row: a replay then cost about 1.3 primary-key reads at 8
// goroutines. Each statement in the function is planned once per session
// (plan_cache_mode, as for every statement here). {replay}, {claim} and
// {begin} are the statements as the variant (and the mutation hook) made
// them; {f} is the function's name (funcName), in the store's schema
// where the store may create it there, else in pg_temp, made by each
// session when it connects.
const beginFuncSQL = `
CREATE OR REPLACE FUNCTION {f}(bytea, bytea, bytea, interval, timestamptz)
RETURNS TABLE (o_decision text, o_token text, o_status integer, o_body bytea, o_at timestamptz)
LANGUAGE plpgsql AS $idemcheck_begin$
BEGIN
    RETURN QUERY {replay};
    IF NOT FOUND THEN
        RETURN QUERY {claim};
        IF NOT FOUND THEN
            RETURN QUERY {begin};
        END IF;
    END IF;
END
$idemcheck_begin$`

// beginCallSQL is Begin's round trip when the function is there: $1
// tenant, $2 key, $3 fingerprint, $4 LockTTL, $5 the request's Now, as
// beginSQL's; {f} is the function's name.
const beginCallSQL = `SELECT * FROM {f}($1, $2, $3, $4, $5)`

// beginFuncArgs is the function's argument list, as to_regprocedure and
// DROP FUNCTION name it.
const beginFuncArgs = `(bytea, bytea, bytea, interval, timestamptz)`

// sessionFuncName is the function's name where each session makes it.
const sessionFuncName = `pg_temp.idemcheck_begin`

// funcName is the name of the function whose body is text, in the schema
// (quoted): idemcheck_begin_ and the start of the body's SHA-256. A
// function's name says what it runs, so stores of different variants (a
// mutant, a generated mutant, a correct store of an older or newer
// idemcheck) share a schema without replacing each other's function, and
// a store finds the one it needs made already by another, or by a
// migration run as a more privileged role.
func funcName(schema, text string) string {
	sum := sha256.Sum256([]byte(text))
	return schema + "." + pgx.Identifier{"idemcheck_begin_" + hex.EncodeToString(sum[:8])}.Sanitize()
}

// readSQL is the separate read of the mutants that split Begin into a read
// and a dependent write: whether the row exists, and what the write would
// depend on. $3 is LockTTL.
const readSQL = `
SELECT status, fingerprint, created_at, clock_timestamp() >= locked_at + $3::interval AS stale
FROM {t} WHERE tenant = $1 AND key = $2`

// overwriteSQL is the write of select-then-insert and stale-overwrite,
// decided on an earlier read: an upsert that replaces whatever row is there
// now (a concurrent claim, or a response saved since the read) with a new
// claim. $4 keeps created_at as read (NULL: now); $5 is the decision.
const overwriteSQL = `
WITH n AS MATERIALIZED (SELECT clock_timestamp() AS clock, gen_random_uuid()::text AS token)
INSERT INTO {t} AS k (tenant, key, fingerprint, status, locked_at, token, created_at, decision)
SELECT $1, $2, $3, 'in_flight', n.clock, n.token, coalesce($4::timestamptz, n.clock), $5::text FROM n
ON CONFLICT (tenant, key) DO UPDATE SET
    fingerprint = EXCLUDED.fingerprint, status = EXCLUDED.status,
    response_status = NULL, response_body = NULL,
    locked_at = EXCLUDED.locked_at, token = EXCLUDED.token,
    created_at = EXCLUDED.created_at, decision = EXCLUDED.decision
RETURNING k.token, k.locked_at`

// blindTakeoverSQL is the write of blind-takeover, decided on an earlier
// read that found the claim stale: it re-checks only that the row is still
// in flight, not that its token is the one read, so two takers both win.
const blindTakeoverSQL = `
UPDATE {t} SET locked_at = clock_timestamp(), token = gen_random_uuid()::text, decision = 'takeover'
WHERE tenant = $1 AND key = $2 AND status = 'in_flight'
RETURNING token, locked_at`

// takeoverByStateSQL is the write of takeover-by-state, decided on an
// earlier read that found the claim stale: it re-checks that the row is
// in flight and stale, not that it is the claim read, so after a release
// it takes over another request's claim (other parameters) made since.
const takeoverByStateSQL = `
UPDATE {t} SET locked_at = clock_timestamp(), token = gen_random_uuid()::text, decision = 'takeover'
WHERE tenant = $1 AND key = $2 AND status = 'in_flight' AND clock_timestamp() >= locked_at + $3::interval
RETURNING token, locked_at`

// pruneSQL deletes the keys first claimed at least $1 ago, by the server's
// clock.
const pruneSQL = `DELETE FROM {t} WHERE created_at <= clock_timestamp() - $1::interval`

// split names how Begin is split into a read and a dependent write, with
// the faults.BeginAfterSelect failpoint between; the correct Begin is not.
type split int

const (
	oneStatement     split = iota
	selectThenInsert       // no row read → upsert a claim over whatever is there now
	blindTakeover          // stale claim read → take it over without comparing tokens
	staleOverwrite         // stale claim read → write the whole row back as a new claim
	takeoverByState        // stale claim read → take over whatever claim is in flight and stale
)

// statements is the SQL of one variant. The correct set is below; each
// mutant copies it and overrides one field (two for token-reuse), so the
// bug is the difference between the two.
type statements struct {
	// The holes of beginSQL.
	fresh    string // the token of a new claim
	next     string // the token of a takeover (k is the row, n the CTE)
	mismatch string // the row's fingerprint differs from the request's
	live     string // the row's lock is younger than LockTTL

	split split

	// complete saves the response: $1 tenant, $2 key, $3 token, $4 status,
	// $5 body. No row changed means the caller is fenced.
	complete string
	// release deletes the claim: $1 tenant, $2 key, $3 token.
	release string
	// prune deletes the expired keys: $1 how long a key is kept.
	prune string
	// keep is how long Prune keeps a key.
	keep func(stores.Config) time.Duration
}

// correct is the correct variant.
var correct = statements{
	fresh:    `gen_random_uuid()::text`,
	next:     `n.token`,
	mismatch: `k.fingerprint <> EXCLUDED.fingerprint`,
	live:     `n.clock < k.locked_at + n.ttl`,
	complete: `
UPDATE {t} SET status = 'done', response_status = $4, response_body = $5
WHERE tenant = $1 AND key = $2
  AND status = 'in_flight' AND token = $3`,
	release: `
DELETE FROM {t}
WHERE tenant = $1 AND key = $2
  AND status = 'in_flight' AND token = $3`,
	prune: pruneSQL,
	keep:  func(c stores.Config) time.Duration { return c.Retention },
}

// Mutants lists the mutant variants this backend implements: its rows of
// stores.Catalogue.
var Mutants = stores.MutantsOn("postgres")

// variants maps each variant to its statements.
var variants = map[string]statements{
	stores.Correct: correct,

	// The correct statements on sessions at another isolation level (open
	// sets it): a configuration mutant.
	RepeatableRead: correct,

	// SELECT, then an upsert in a second statement: two concurrent
	// requests both read "no row" and both claim.
	"select-then-insert": mutate(func(s *statements) { s.split = selectThenInsert }),

	// The save does not check status or token: a stale owner overwrites
	// the new owner's answer. ($3, the token, is passed and ignored.)
	"unfenced-complete": mutate(func(s *statements) {
		s.complete = `
UPDATE {t} SET status = 'done', response_status = $4, response_body = $5
WHERE tenant = $1 AND key = $2
  AND $3::text IS NOT NULL`
	}),

	// The delete does not check status or token: a stale owner deletes the
	// new owner's claim.
	"unfenced-release": mutate(func(s *statements) {
		s.release = `
DELETE FROM {t}
WHERE tenant = $1 AND key = $2
  AND $3::text IS NOT NULL`
	}),

	// Fingerprints are never compared: a reused key with other parameters
	// replays the first answer.
	"no-fingerprint": mutate(func(s *statements) { s.mismatch = `false` }),

	// Staleness judged on a read; the write re-checks only status.
	"blind-takeover": mutate(func(s *statements) { s.split = blindTakeover }),

	// A per-row counter as the token: it restarts at 1 when the row is
	// deleted (release, prune), so an old owner's token comes back. (The
	// card's locked_at-in-ms token needs a skewed or coarse clock to repeat;
	// with one server clock it would not, and the mutant would survive.)
	// A token that is not a counter (a row of another variant) counts as 0.
	"token-reuse": mutate(func(s *statements) {
		s.fresh = `'1'`
		s.next = `(CASE WHEN k.token ~ '^[0-9]{1,18}$' THEN k.token::bigint ELSE 0 END + 1)::text`
	}),

	// A claim is never stale: a crashed owner's key stays in flight.
	"no-takeover": mutate(func(s *statements) { s.live = `true` }),

	// Staleness judged by the request's clock, not the server's (the
	// lesson card's locked_at from the caller, in a store that declares
	// the server's clock): a client whose clock runs ahead takes a
	// healthy owner over.
	"request-clock": mutate(func(s *statements) { s.live = `n.asked < k.locked_at + n.ttl` }),

	// Keys are kept only for LockTTL, not Retention.
	"short-retention": mutate(func(s *statements) {
		s.keep = func(c stores.Config) time.Duration { return c.LockTTL }
	}),

	// Takeover decided on a read, then the whole row written back: a
	// response saved since the read is erased.
	"stale-overwrite": mutate(func(s *statements) { s.split = staleOverwrite }),

	// Staleness judged on a read; the write re-checks the row's state (in
	// flight, stale), not the claim it read.
	"takeover-by-state": mutate(func(s *statements) { s.split = takeoverByState }),

	// Keys stored case-folded, or without their tenant: the statements are
	// correct, the key bound is not (stores.StoredKey, in Begin, Complete
	// and Release). Likewise the fingerprint bound with the amount's value
	// taken out (stores.StoredFingerprint, in Begin).
	"case-folded-key":          correct,
	"tenant-blind":             correct,
	"joined-key":               correct,
	"fingerprint-drops-amount": correct,

	// The save checks the token but not that the key is still in flight:
	// a save sent twice overwrites the answer already replayed.
	"complete-overwrites-done": mutate(func(s *statements) {
		s.complete = `
UPDATE {t} SET status = 'done', response_status = $4, response_body = $5
WHERE tenant = $1 AND key = $2
  AND token = $3`
	}),

	// The release checks the token but not that the key is still in
	// flight: a deferred release after the save deletes the answer.
	"release-deletes-done": mutate(func(s *statements) {
		s.release = `
DELETE FROM {t}
WHERE tenant = $1 AND key = $2
  AND token = $3`
	}),

	// The release matches the token as a pattern: a token holding % or _
	// matches the owner's, and a stranger deletes a live claim.
	"release-token-like": mutate(func(s *statements) {
		s.release = `
DELETE FROM {t}
WHERE tenant = $1 AND key = $2
  AND status = 'in_flight' AND token LIKE $3`
	}),

	// Prune by key name alone: an expired key's namesakes in other
	// tenants, young or not, go too.
	"prune-drops-tenant": mutate(func(s *statements) {
		s.prune = `DELETE FROM {t} WHERE key IN (SELECT key FROM {t} WHERE created_at <= clock_timestamp() - $1::interval)`
	}),

	// Prune also deletes in-flight claims, whatever their age.
	"prune-sweeps-in-flight": mutate(func(s *statements) {
		s.prune = `DELETE FROM {t} WHERE created_at <= clock_timestamp() - $1::interval OR status = 'in_flight'`
	}),

	// The fingerprint is compared only while the claim is live or done: a
	// stale claim is taken over by a request with any parameters.
	"takeover-ignores-fingerprint": mutate(func(s *statements) {
		s.mismatch = `k.fingerprint <> EXCLUDED.fingerprint AND (k.status = 'done' OR n.clock < k.locked_at + n.ttl)`
	}),

	// Prune deletes nothing: keys outlive their retention.
	"never-expire": mutate(func(s *statements) {
		s.prune = `DELETE FROM {t} WHERE false AND created_at <= clock_timestamp() - $1::interval`
	}),
}

func mutate(f func(*statements)) statements {
	s := correct
	f(&s)
	return s
}

// sqlTexts is a variant's statements with the schema and table filled in,
// ready to run.
type sqlTexts struct {
	begin, replay, claim, read, overwrite, blindTakeover, byState, complete, release, prune string
	// beginFunc makes Begin's function (replay, then claim, then begin)
	// in the store's schema, named funcName; sessionFunc makes it in a
	// session's pg_temp. callFunc and callSession call each; funcName
	// names the schema's.
	beginFunc, sessionFunc, callFunc, callSession, funcName string
}

// Each statement, its holes filled but its schema and table still {s} and
// {t}, goes through cfg.Statements (the mutation hook, stores.Config) under
// its name, so that a generated mutant's text is the same whatever
// namespace the store opens in.
func (s statements) render(schema, table string, cfg stores.Config) sqlTexts {
	holes := strings.NewReplacer(
		"{fresh}", s.fresh, "{next}", s.next, "{mismatch}", s.mismatch, "{live}", s.live,
	)
	names := strings.NewReplacer("{s}", schema, "{t}", table)
	r := func(name, text string) string {
		return names.Replace(cfg.Statement(name, holes.Replace(text)))
	}
	// The split mutants' extra statements go through the hook only in the
	// variants that run them: the hook sees what the variant runs.
	split := func(name, text string, used bool) string {
		if !used {
			return names.Replace(holes.Replace(text))
		}
		return r(name, text)
	}
	t := sqlTexts{
		begin:         r("begin", beginSQL),
		replay:        r("replay", replaySQL),
		claim:         r("claim", claimSQL),
		read:          split("read", readSQL, s.split != oneStatement),
		overwrite:     split("overwrite", overwriteSQL, s.split == selectThenInsert || s.split == staleOverwrite),
		blindTakeover: split("blind-takeover", blindTakeoverSQL, s.split == blindTakeover),
		byState:       split("takeover-by-state", takeoverByStateSQL, s.split == takeoverByState),
		complete:      r("complete", s.complete),
		release:       r("release", s.release),
		prune:         r("prune", s.prune),
	}
	body := strings.NewReplacer("{replay}", t.replay, "{claim}", t.claim, "{begin}", t.begin).Replace(beginFuncSQL)
	name := funcName(schema, body)
	t.beginFunc = strings.Replace(body, "{f}", name, 1)
	t.sessionFunc = strings.Replace(body, "{f}", sessionFuncName, 1)
	t.callFunc = strings.Replace(beginCallSQL, "{f}", name, 1)
	t.callSession = strings.Replace(beginCallSQL, "{f}", sessionFuncName, 1)
	t.funcName = name
	return t
}

// Equivalent argues, for each generated mutant of the correct statements
// that no client can tell apart from them, or whose behaviour the contract
// allows (`idemcheck mutate`, keyed by the mutant's ID), why.
var Equivalent = map[string]string{
	`begin: shift-boundary "n.clock < k.locked_at + n.ttl" → "n.clock <= k.locked_at + n.ttl"`:  serverBoundary,
	`replay: shift-boundary "n.clock < k.locked_at + n.ttl" → "n.clock <= k.locked_at + n.ttl"`: serverBoundary,
	`complete: like-equals "tenant = $1" → "tenant LIKE $1"`:                                    sameToken,
	`complete: like-equals "key = $2" → "key LIKE $2"`:                                          sameToken,
	`release: like-equals "tenant = $1" → "tenant LIKE $1"`:                                     sameToken,
	`release: like-equals "key = $2" → "key LIKE $2"`:                                           sameToken,
	`prune: shift-boundary "created_at <= clock_timestamp() - $1::interval" → "created_at < clock_timestamp() - $1::interval"`: "Prune " +
		"removes keys older than the retention (stores.Store): a key exactly Retention old is on the boundary, where the model lets it be " +
		"kept or gone, and this prune keeps it there and removes it one microsecond later",
}

// serverBoundary argues the staleness boundary of Begin's statements
// (beginSQL's decision and replaySQL's read judge it alike).
const serverBoundary = "the claim is judged on the server's " +
	"clock, in microseconds, and no client can place a call on its exact microsecond: at LockTTL ± the model's slack for a server's " +
	"clock (check.ServerClockSlack) either answer is right, so this edit (409 for one microsecond more) is a behaviour the contract " +
	"allows (the caller-clock stores, whose boundary the scheduler lands on, have the class as the stale-boundary mutant)"

// sameToken argues a pattern on the tenant or key of a write fenced by
// the token: the token already picks one row.
const sameToken = "token = $3 already picks at most one row: a token is a random 128-bit owner id, made for one claim of one " +
	"(tenant, key), so no other row holds the token the write is given, whatever else a pattern on the tenant or key matches"
