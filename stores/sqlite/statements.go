package sqlite

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// createTable is the lesson card's table, scoped by tenant, with a fencing token
// that is not the clock and the timestamps Prune needs. Tenant, key,
// fingerprint and body are BLOBs so that every byte string round-trips (NUL,
// invalid UTF-8) and compares by its bytes; the CHECKs refuse a TEXT value
// bound by mistake, which would never equal the BLOB of the same bytes.
// Times are Unix nanoseconds from the caller's clock.
const (
	createTable = `CREATE TABLE IF NOT EXISTS idempotency_keys (
		tenant      BLOB    NOT NULL CHECK (typeof(tenant) = 'blob' AND length(tenant) <= 255),
		key         BLOB    NOT NULL CHECK (typeof(key) = 'blob' AND length(key) BETWEEN 1 AND 255),
		fingerprint BLOB    NOT NULL,
		status      TEXT    NOT NULL CHECK (status IN ('in_flight', 'done')),
		resp_status INTEGER,          -- saved response, NULL while in flight
		resp_body   BLOB,
		locked_at   INTEGER NOT NULL, -- when the current owner claimed, Unix ns
		token       TEXT    NOT NULL, -- the current owner's fencing token
		created_at  INTEGER NOT NULL, -- first claim, Unix ns; Prune goes by it
		PRIMARY KEY (tenant, key)
	) WITHOUT ROWID`
	createIndex = `CREATE INDEX IF NOT EXISTS idempotency_keys_created_at ON idempotency_keys (created_at)`
)

// probe fails on a file whose idempotency_keys table is not ours.
const probe = `SELECT tenant, key, fingerprint, status, resp_status, resp_body, locked_at, token, created_at
	FROM idempotency_keys LIMIT 0`

// statements is the SQL one variant runs. Every statement takes named
// parameters from Store.args (sqlite.go): :tenant :key :fingerprint :now
// :lock_ttl :retention :token, and the extras a step names.
type statements struct {
	// claim inserts an in-flight row unless one exists: 1 row changed
	// means the caller claimed the key.
	claim string
	// read returns the existing row judged for Begin: same_fp, done,
	// resp_status, resp_body, stale, token, created_at.
	read string
	// replay returns the existing row judged for Begin's answer without
	// the write lock: judged (same fingerprint, done and stale as the low
	// bits of one integer, judgedSameFP and the rest, and resp_status
	// above them), resp_body.
	// It judges the fingerprint and the staleness as read does (readPair).
	// The Store prepares it with its parameters bound by position
	// (positional).
	replay string
	// takeover is the compare-and-set on the token read (:old_token): of
	// two takers only one can change the row.
	takeover string
	// complete saves the response, fenced by the token.
	complete string
	// release deletes the claim, fenced by the token.
	release string
	// prune deletes up to :batch rows older than the retention.
	prune string

	// The mutants that split a read from the write depending on it run one
	// more step after the read (the correct code never runs these).
	//
	// claimAfterRead: select-then-insert's write once its read found no row.
	claimAfterRead string
	// takeoverAfterRead: blind-takeover's and stale-overwrite's write once
	// their read found a stale claim (:created_at is the one read).
	takeoverAfterRead string
}

const (
	insertInFlight = `INSERT INTO idempotency_keys (tenant, key, fingerprint, status, locked_at, token, created_at)
	VALUES (:tenant, :key, :fingerprint, 'in_flight', :now, :token, :now)`
	readRow = `SELECT %s AS same_fp, status = 'done', resp_status, resp_body, %s AS stale, token, created_at
	FROM idempotency_keys WHERE tenant = :tenant AND key = :key`
	sameFingerprint = `fingerprint = :fingerprint`
	// readAnswer packs replay's three judgements (the judged bits) and
	// the saved status (above them: 8 times it, so that any status short
	// of 2^59, negative too, comes back whole) into one column, each
	// comparison written as readRow writes it (a generated mutant edits
	// the same text in both). A replay is the hot read, and each result
	// column costs it a few percent of a primary-key read (modernc.org/sqlite
	// fetches every column's name and declared type on every query): two
	// columns, as the raw read has, not five.
	readAnswer = `SELECT (%s) + 2 * (status = 'done') + 4 * (%s) + 8 * coalesce(resp_status, 0) AS judged, resp_body
	FROM idempotency_keys WHERE tenant = :tenant AND key = :key`
	isStale     = `:now - locked_at >= :lock_ttl` // as memory: now.Sub(lockedAt) >= LockTTL
	setTakeover = `UPDATE idempotency_keys SET locked_at = :now, token = :token
	WHERE tenant = :tenant AND key = :key AND status = 'in_flight'`
	setDone = `UPDATE idempotency_keys SET status = 'done', resp_status = :resp_status, resp_body = :resp_body
	WHERE tenant = :tenant AND key = :key`
	deleteClaim = `DELETE FROM idempotency_keys
	WHERE tenant = :tenant AND key = :key`
	fence      = ` AND status = 'in_flight' AND token = :token`
	pruneWhere = `DELETE FROM idempotency_keys WHERE (tenant, key) IN (
		SELECT tenant, key FROM idempotency_keys WHERE created_at <= %s LIMIT :batch)`
)

// correct is the store as docs/DESIGN.md §1 specifies it.
var correct = statements{
	claim:    insertInFlight + ` ON CONFLICT (tenant, key) DO NOTHING`,
	read:     fmt.Sprintf(readRow, sameFingerprint, isStale),
	replay:   fmt.Sprintf(readAnswer, sameFingerprint, isStale),
	takeover: setTakeover + ` AND token = :old_token`,
	complete: setDone + fence,
	release:  deleteClaim + fence,
	prune:    fmt.Sprintf(pruneWhere, `:now - :retention`),
}

// Mutants lists the mutant variants this backend implements: its rows of
// stores.Catalogue.
var Mutants = stores.MutantsOn("sqlite")

// statementsFor returns the SQL of the variant: the correct set with the
// mutant's one statement replaced. select-then-insert, blind-takeover and
// stale-overwrite also split a read from the write that depends on it: their
// write is here, their flow in begin.go. token-reuse changes only how the
// token is made (tokenFor, below).
func statementsFor(variant string) statements {
	s := correct
	switch variant {
	case "select-then-insert", "process-lock":
		// Upsert: overwrites whatever a concurrent claim wrote since the read.
		s.claimAfterRead = insertInFlight + ` ON CONFLICT (tenant, key) DO UPDATE SET
		fingerprint = excluded.fingerprint, status = 'in_flight', resp_status = NULL, resp_body = NULL,
		locked_at = excluded.locked_at, token = excluded.token, created_at = excluded.created_at`
	case "unfenced-complete":
		s.complete = setDone // no fence: any caller's save lands
	case "unfenced-release":
		s.release = deleteClaim // no fence: any caller's release deletes
	case "no-fingerprint":
		s.read, s.replay = readPair(`1`, isStale) // every fingerprint "matches"
	case "no-takeover":
		s.read, s.replay = readPair(sameFingerprint, `0`) // no claim is ever stale
	case "stale-boundary":
		s.read, s.replay = readPair(sameFingerprint, `:now - locked_at > :lock_ttl`) // stale only past LockTTL, not at it
	case "short-retention":
		s.prune = fmt.Sprintf(pruneWhere, `:now - :lock_ttl`) // keeps keys only for LockTTL
	case "complete-overwrites-done":
		s.complete = setDone + ` AND token = :token` // the token, not that the key is still in flight
	case "release-token-like":
		s.release = deleteClaim + ` AND status = 'in_flight' AND token LIKE :token` // a pattern where an equality belongs
	case "release-deletes-done":
		s.release = deleteClaim + ` AND token = :token` // the token, not that the key is still in flight
	case "prune-drops-tenant":
		// By key name alone: the expired key's namesakes in other tenants go too.
		s.prune = `DELETE FROM idempotency_keys WHERE key IN (
		SELECT key FROM idempotency_keys WHERE created_at <= :now - :retention LIMIT :batch)`
	case "created-in-seconds":
		// The creation time's second, not the time: up to a second early.
		s.prune = `DELETE FROM idempotency_keys WHERE (tenant, key) IN (
		SELECT tenant, key FROM idempotency_keys WHERE created_at / 1000000000 * 1000000000 <= :now - :retention LIMIT :batch)`
	case "prune-sweeps-in-flight":
		s.prune = fmt.Sprintf(pruneWhere, `:now - :retention OR status = 'in_flight'`) // "abandoned" claims too
	case "takeover-ignores-fingerprint":
		// A stale claim "matches" any fingerprint: it is taken over by anyone.
		// (A done row is judged as the correct store judges it: replay keeps
		// sameFingerprint.)
		s.read, s.replay = readPair(sameFingerprint+` OR (status = 'in_flight' AND `+isStale+`)`, isStale)
	case "never-expire":
		s.prune = fmt.Sprintf(pruneWhere, `:now - :retention AND 0`) // deletes nothing
	// case-folded-key and tenant-blind change the key bound, not the SQL
	// (stores.StoredKey, in args).
	case "blind-takeover":
		s.takeoverAfterRead = setTakeover // no `AND token = :old_token`
	case "takeover-by-state":
		// Compares the row's state, not its identity: any claim in flight
		// and stale when the write runs, whoever made it.
		s.takeoverAfterRead = setTakeover + ` AND ` + isStale
	case "stale-overwrite":
		// Writes the row as read back whole, erasing a response saved since.
		s.takeoverAfterRead = `INSERT OR REPLACE INTO idempotency_keys
		(tenant, key, fingerprint, status, resp_status, resp_body, locked_at, token, created_at)
	VALUES (:tenant, :key, :fingerprint, 'in_flight', NULL, NULL, :now, :token, :created_at)`
	}
	return s
}

// The bits of replay's judged column, each a comparison (0 or 1 in
// SQLite): readPair's sameFP and stale, and status = 'done'.
const (
	judgedSameFP = 1 << iota // the fingerprint judged the same (sameFP)
	judgedDone               // status = 'done'
	judgedStale              // the claim judged stale (stale)
	judgedAll    = judgedSameFP | judgedDone | judgedStale
)

// readPair is Begin's two reads, read (in the write transaction) and
// replay (without the write lock), judging the fingerprint by sameFP and
// the staleness by stale: a mutant that changes either judgement changes
// both reads, so the answer does not depend on which read gave it.
func readPair(sameFP, stale string) (read, replay string) {
	return fmt.Sprintf(readRow, sameFP, stale), fmt.Sprintf(readAnswer, sameFP, stale)
}

// Equivalent argues, for each generated mutant of the correct statements
// that no client can tell apart from them (`idemcheck mutate`, keyed by the
// mutant's ID), why. The takeover's are conditions that Begin's
// transaction already implies: the UPDATE runs in the same BEGIN IMMEDIATE
// transaction as the read that found the row, and that transaction holds
// the file's write lock from before the read until its commit.
var Equivalent = map[string]string{
	// Begin's transaction's first statement is its claim, an INSERT: a
	// write, so a deferred transaction takes the write lock there, before
	// anything is read, as an immediate one does at BEGIN (measured: the
	// workers scenario, its processes held inside Begin's transaction,
	// saw no error either way).
	`settings: weaken-setting "transaction = IMMEDIATE" → "transaction = DEFERRED"`: "Begin's transaction starts with its claim, " +
		"an INSERT, which takes the file's write lock (waiting under the busy timeout) before the transaction reads anything: " +
		"a deferred transaction holds the lock from the same point on, so the read and the takeover see one state either way",
	`takeover: drop-conjunct "status = 'in_flight'"`: "the read in the same write transaction found the row in flight " +
		"(decide takes over only then), and no other writer can change it before the UPDATE: the write lock is held from the read to the commit",
	`takeover: drop-conjunct "token = :old_token"`: ":old_token is the token the read in the same write transaction returned, " +
		"and no other writer can change it before the UPDATE: the write lock is held from the read to the commit (the compare-and-set is belt and braces here)",
	`takeover: drop-conjunct "tenant = :tenant"`: "token = :old_token already picks one row: :old_token is this (tenant, key)'s own " +
		"random 128-bit token, read in the same transaction, and no other row holds it (tokens are never shared between rows)",
	`takeover: drop-conjunct "key = :key"`: "token = :old_token already picks one row: :old_token is this (tenant, key)'s own " +
		"random 128-bit token, read in the same transaction, and no other row holds it (tokens are never shared between rows)",
	`takeover: like-equals "token = :old_token" → "token LIKE :old_token"`: ":old_token is the token the read in the same write " +
		"transaction returned: 32 hex digits, no LIKE wildcard, and no other writer can change the row before the UPDATE (the write lock is held from the read to the commit)",
	// SQLite's LIKE is false on BLOB operands (x'7430' LIKE x'743025' is
	// 0), and tenant and key are BLOBs.
	`replay: like-equals "tenant = :tenant" → "tenant LIKE :tenant"`: "SQLite's LIKE is false on BLOB operands and tenant is a BLOB: " +
		"the replay read never finds a row, and Begin decides in its write transaction, whose read compares with =: the same answers, slower",
	`replay: like-equals "key = :key" → "key LIKE :key"`: "SQLite's LIKE is false on BLOB operands and key is a BLOB: " +
		"the replay read never finds a row, and Begin decides in its write transaction, whose read compares with =: the same answers, slower",
	`prune: shift-boundary "created_at <= :now - :retention" → "created_at < :now - :retention"`: "Prune removes keys older than the " +
		"retention (stores.Store): a key exactly Retention old is on the boundary, where the model lets it be kept or gone, and this prune " +
		"keeps it there and removes it one nanosecond later",
}

// hooked passes each statement through cfg.Statements (the mutation hook,
// stores.Config), under the names `idemcheck mutate` reports. The steps
// only a split mutant runs are passed too, so that the hook sees every
// statement the variant runs.
func (s statements) hooked(cfg stores.Config) statements {
	for _, st := range []struct {
		name string
		text *string
	}{
		{"claim", &s.claim}, {"read", &s.read}, {"takeover", &s.takeover},
		{"complete", &s.complete}, {"release", &s.release}, {"prune", &s.prune},
		{"claim-after-read", &s.claimAfterRead}, {"takeover-after-read", &s.takeoverAfterRead},
		{"replay", &s.replay},
	} {
		if *st.text != "" {
			*st.text = cfg.Statement(st.name, *st.text)
		}
	}
	return s
}

// newToken returns a random 128-bit owner id: unique across the key's life,
// whatever the clocks do and however often the row is deleted.
func newToken() stores.Token {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (it crashes the program instead)
	return stores.Token(hex.EncodeToString(b[:]))
}

// tokenFor picks the fencing token of a claim made at now. The token-reuse
// mutant uses the card's scheme, locked_at in milliseconds, which comes back
// after a release (or with a skewed or coarse clock).
func (s *Store) tokenFor(now time.Time) stores.Token {
	if s.variant == "token-reuse" {
		return stores.Token(fmt.Sprint(now.UnixMilli()))
	}
	return newToken()
}
