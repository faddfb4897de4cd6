package redis

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/idemcheck/idemcheck/stores"
)

// The correct scripts. Each operation is one script run atomically by the
// server: nothing else touches the key between its read and its write, which
// is what makes Begin's claim and takeover compare-and-sets.
//
// A key is one hash with the fields
//
//	fp          the request fingerprint
//	status      "in_flight" | "done"
//	locked_at   server time of the current claim, ms since the epoch
//	token       the current claim's fencing token
//	created_at  server time of the first claim, ms; the key expires at created_at + Retention
//	resp_status, resp_body   the saved response (status "done")
//
// Time is the server's, read with TIME inside the script, in whole ms. Every
// mutant below is this text with a line or two replaced (see variants), so
// `go doc` or a diff shows exactly what each bug changes.

// beginLua decides per the decision table of docs/DESIGN.md §1.
//
//	KEYS[1]  the key's hash
//	ARGV[1]  fingerprint       ARGV[2]  a fresh random token (used if the caller claims)
//	ARGV[3]  LockTTL, ms       ARGV[4]  Retention, ms
//	ARGV[5]  created_at of the record read by an earlier call (stale-overwrite only)
//	ARGV[6]  the request's Now, ms: never read (time is the server's); request-clock judges by it
//
// Reply: {"claimed", now, token, takeover 0|1} | {"replay", now, status, body} |
// {"in_flight", now} | {"mismatch", now} | {"stale", now, created_at} (a split mutant's read).
const beginLua = `local key, fp = KEYS[1], ARGV[1]
local ttl, keep = tonumber(ARGV[3]), tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function newtoken() return ARGV[2] end
local function claim(created, takeover)
  local tok = newtoken()
  redis.call('HSET', key, 'fp', fp, 'status', 'in_flight', 'locked_at', now, 'token', tok, 'created_at', created)
  redis.call('PEXPIREAT', key, created + keep)
  return {'claimed', now, tok, takeover}
end
-- The script is atomic: the token read below is still the current one when
-- takeover() replaces it, so the takeover is a compare-and-set, one winner.
local function takeover()
  local tok = newtoken()
  redis.call('HSET', key, 'locked_at', now, 'token', tok)
  return {'claimed', now, tok, 1}
end
local h = redis.call('HMGET', key, 'fp', 'status', 'locked_at', 'token', 'created_at', 'resp_status', 'resp_body')
local status, locked_at, created_at = h[2], tonumber(h[3]), tonumber(h[5])
if not status then return claim(now, 0) end
if h[1] ~= fp then return {'mismatch', now} end
if status == 'done' then return {'replay', now, h[6], h[7]} end
if now - locked_at < ttl then return {'in_flight', now} end
return takeover()
`

// fenceLua is the guard of Complete and Release: the key is in flight under
// the caller's token (ARGV[1]). 0 rows changed means ErrFenced.
const fenceLua = `if h[1] ~= 'in_flight' or h[2] ~= ARGV[1] then return 0 end`

// completeLua saves the response (ARGV[2] status, ARGV[3] body) under the
// token. HSET keeps the key's expiry: Complete does not extend retention,
// which runs from the first claim (see the package doc).
const completeLua = `local h = redis.call('HMGET', KEYS[1], 'status', 'token')
` + fenceLua + `
redis.call('HSET', KEYS[1], 'status', 'done', 'resp_status', ARGV[2], 'resp_body', ARGV[3])
return 1
`

// releaseLua deletes the claim under the token.
const releaseLua = `local h = redis.call('HMGET', KEYS[1], 'status', 'token')
` + fenceLua + `
` + lineDelete + `
return 1
`

// lineDelete is releaseLua's delete, which release-deletes-prefix replaces.
const lineDelete = `redis.call('DEL', KEYS[1])`

// edit replaces one line of a correct script (it must occur exactly once).
type edit struct{ old, new string }

// split says how a mutant's Begin is cut into two round trips with the
// failpoint faults.BeginAfterSelect between them.
type split int

const (
	oneCall          split = iota // the correct shape: one atomic script
	selectThenInsert              // HGETALL, failpoint, then an upsert if the read saw no key
	takeoverOnRead                // Begin up to "stale", failpoint, then the takeover write
	existsThenClaim               // EXISTS, then an upsert if it said 0: no failpoint of ours between
)

// variant is a variant's scripts, as edits to the correct ones.
type variant struct {
	split    split
	begin    []edit // Begin (its first call when split by takeoverOnRead)
	second   []edit // the second call of a split Begin
	complete []edit
	release  []edit
}

// Lines of beginLua the mutants replace.
const (
	lineNewToken = `local function newtoken() return ARGV[2] end`
	lineExpire   = `  redis.call('PEXPIREAT', key, created + keep)`
	lineAbsent   = `if not status then return claim(now, 0) end`
	lineMismatch = `if h[1] ~= fp then return {'mismatch', now} end`
	lineFresh    = `if now - locked_at < ttl then return {'in_flight', now} end`
	lineTakeover = `return takeover()`
	// returnStale ends a split Begin's first call: the staleness is judged on
	// this read, and the write comes in a second call.
	returnStale = `return {'stale', now, created_at}`
)

// variants maps each variant to its edits of the correct scripts.
var variants = map[string]variant{
	"correct": {},
	// Read in one call (HGETALL), write in another: between the two, a
	// concurrent request also sees no key, and both upsert a claim.
	"select-then-insert": {split: selectThenInsert,
		second: []edit{{lineAbsent, `if true then return claim(now, 0) end -- the earlier read saw no key: upsert`}}},
	"unfenced-complete": {complete: []edit{{fenceLua, `if not h[1] then return 0 end -- any status, any token`}}},
	"unfenced-release":  {release: []edit{{fenceLua, `if not h[1] then return 0 end -- any status, any token`}}},
	"no-fingerprint":    {begin: []edit{{lineMismatch, `-- the fingerprint is never compared`}}},
	// Staleness judged on the first call's read; the second call's write
	// checks only that the key is still in flight, not under which token.
	"blind-takeover": {split: takeoverOnRead,
		begin:  []edit{{lineTakeover, returnStale}},
		second: []edit{{lineFresh, `-- staleness not re-checked: only status = in_flight`}}},
	// Staleness judged on the first call's read; the second call takes
	// over any claim in flight and stale, whoever's: after a release and
	// another request's claim (other parameters), the taker takes that
	// one over.
	"takeover-by-state": {split: takeoverOnRead,
		begin:  []edit{{lineTakeover, returnStale}},
		second: []edit{{lineMismatch, `-- the fingerprint not compared again: the claim read was of ours`}}},
	// The card's scheme: a per-key counter kept in the hash, so it restarts
	// at 1 once the key is released (or expires) and an old token comes back.
	"token-reuse": {begin: []edit{{lineNewToken, `local function newtoken() return tostring(redis.call('HINCRBY', key, 'seq', 1)) end`}}},
	"no-takeover": {begin: []edit{{lineFresh, `if true then return {'in_flight', now} end -- never stale`}}},
	// Staleness judged by the request's clock, not the server's (the
	// lesson card's locked_at from the caller, in a store that declares
	// the server's clock): a client whose clock runs ahead takes a healthy
	// owner over.
	"request-clock": {begin: []edit{{lineFresh, `if tonumber(ARGV[6]) - locked_at < ttl then return {'in_flight', now} end -- the request's clock`}}},
	// The key expires after LockTTL instead of Retention.
	"short-retention": {begin: []edit{{lineExpire, `  redis.call('PEXPIREAT', key, created + ttl)`}}},
	// Staleness judged on the first call's read; the second call writes the
	// whole record back as read, erasing a response saved in between.
	"stale-overwrite": {split: takeoverOnRead,
		begin:  []edit{{lineTakeover, returnStale}},
		second: []edit{{lineAbsent, `if true then return claim(tonumber(ARGV[5]), 1) end -- write the record read earlier back whole`}}},
	// The key is stored case-folded or without its tenant: the scripts are
	// correct, the key they get is not (stores.StoredKey, in redisKey);
	// likewise the fingerprint, the amount's value taken out
	// (stores.StoredFingerprint, in Begin).
	"case-folded-key":          {},
	"tenant-blind":             {},
	"joined-key":               {},
	"fingerprint-drops-amount": {},
	// The save and the release check the token, not that the key is still
	// in flight: a second save overwrites the answer, a deferred release
	// deletes it.
	"complete-overwrites-done": {complete: []edit{{fenceLua, `if h[2] ~= ARGV[1] then return 0 end -- the token only`}}},
	"release-deletes-done":     {release: []edit{{fenceLua, `if h[2] ~= ARGV[1] then return 0 end -- the token only`}}},
	// The release deletes "the key and its side keys": every key whose
	// name it begins, found by KEYS (a glob, so its own wildcards match
	// too): a neighbour whose key extends it loses its record.
	"release-deletes-prefix": {release: []edit{{lineDelete, `for _, k in ipairs(redis.call('KEYS', KEYS[1] .. '*')) do redis.call('DEL', k) end -- the key and its side keys`}}},
	// The release finds the token with string.find, which reads its
	// second argument as a Lua pattern: ".*" matches every token.
	"release-token-like": {release: []edit{{fenceLua, `if h[1] ~= 'in_flight' or not string.find(h[2], ARGV[1]) then return 0 end -- the token as a pattern`}}},
	// The scripts are correct; Prune sweeps in-flight keys (redis.go).
	"prune-sweeps-in-flight": {},
	// EXISTS in one call, then, if the key was absent, the upsert of
	// select-then-insert in a second: the same race, written as a team
	// would write it, with no failpoint between the calls. Only the
	// driver's round-trip hook (faults.BeforeRoundTrip) lets a harness in.
	"split-claim": {split: existsThenClaim,
		second: []edit{{lineAbsent, `if true then return claim(now, 0) end -- EXISTS said no key: upsert`}}},
	// The fingerprint is compared only while the claim is live or done: a
	// stale claim is taken over by a request with any parameters.
	"takeover-ignores-fingerprint": {begin: []edit{{lineMismatch, `if h[1] ~= fp and (status == 'done' or now - locked_at < ttl) then return {'mismatch', now} end`}}},
	// The key never expires: it outlives its retention.
	"never-expire": {begin: []edit{{lineExpire, `  -- no expiry: the key is kept forever`}}},
}

// Equivalent argues, for each generated mutant of the correct scripts that
// no client can tell apart from them (`idemcheck mutate`, keyed by the
// mutant's ID), why.
var Equivalent = map[string]string{
	`begin: drop-set "'created_at', created"`: "no correct script reads the field: claim() sets the key's expiry from its " +
		"argument, not from the hash, and the only reader (h[5], into created_at) feeds the 'stale' reply that only the " +
		"split mutants' first call returns (returnStale); retention is Redis's own expiry, set by PEXPIREAT",
	`begin: shift-boundary "now - locked_at < ttl" → "now - locked_at <= ttl"`: "the claim is judged on the server's clock, in " +
		"milliseconds, and no client can place a call on the server's exact millisecond: at LockTTL ± the model's slack for a server's " +
		"clock (check.ServerClockSlack) either answer is right, so this edit (409 for one millisecond more) is a behaviour the contract allows " +
		"(the caller-clock stores, whose boundary the scheduler lands on, have the class as the stale-boundary mutant)",
}

// script is one Lua source and its SHA-1, the name EVALSHA runs it by.
type script struct {
	name string
	src  string
	sha  string
}

func newScript(name, src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
}

// scriptSet is the scripts one variant runs.
type scriptSet struct {
	split    split
	begin    *script
	second   *script // nil unless split
	complete *script
	release  *script
}

// all returns the set's scripts, for loading at Open.
func (ss *scriptSet) all() []*script {
	out := []*script{ss.begin, ss.complete, ss.release}
	if ss.second != nil {
		out = append(out, ss.second)
	}
	return out
}

// hooked passes each script through cfg.Statements (the mutation hook,
// stores.Config) under its name ("begin", "begin-write", "complete",
// "release"): the set unchanged when no hook is set, else a new set whose
// changed scripts carry their own SHA.
func (ss *scriptSet) hooked(cfg stores.Config) *scriptSet {
	if !cfg.Hooked() {
		return ss
	}
	hook := func(name string, sc *script) *script {
		if sc == nil {
			return nil
		}
		return newScript(sc.name, cfg.Statement(name, sc.src))
	}
	return &scriptSet{
		split:    ss.split,
		begin:    hook("begin", ss.begin),
		second:   hook("begin-write", ss.second),
		complete: hook("complete", ss.complete),
		release:  hook("release", ss.release),
	}
}

// scriptSets holds every variant's scripts, built once at init.
var scriptSets = buildScriptSets()

func buildScriptSets() map[string]*scriptSet {
	sets := make(map[string]*scriptSet, len(variants))
	for name, v := range variants {
		ss := &scriptSet{
			split:    v.split,
			begin:    newScript(name+"/begin", applyEdits(name, beginLua, v.begin)),
			complete: newScript(name+"/complete", applyEdits(name, completeLua, v.complete)),
			release:  newScript(name+"/release", applyEdits(name, releaseLua, v.release)),
		}
		if v.split == takeoverOnRead || v.split == selectThenInsert || v.split == existsThenClaim {
			ss.second = newScript(name+"/begin-write", applyEdits(name, beginLua, v.second))
		}
		sets[name] = ss
	}
	return sets
}

// applyEdits replaces each edit's line, which must occur exactly once, so a
// mutant can never silently drift from the correct script it edits.
func applyEdits(variant, src string, edits []edit) string {
	for _, e := range edits {
		if n := strings.Count(src, e.old); n != 1 {
			panic(fmt.Sprintf("redis: variant %s: line %q occurs %d times in its script", variant, e.old, n))
		}
		src = strings.Replace(src, e.old, e.new, 1)
	}
	return src
}
