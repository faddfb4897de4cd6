'use strict';
// The lesson card's store (lib/db.ts) in JavaScript over SQLite, checked by
// idemcheck:
//
//   NODE_PATH=$(bash scripts/node-sqlite3.sh) \
//     idemcheck check --store exec --cmd "node examples/exec-js-sqlite/store.js"
//
// The card's table, scoped by tenant, with two columns the card leaves out:
// token, a random owner id beside locked_at (the card fences on locked_at
// alone, and a locked_at comes back: see the token-reuse variant), and
// created_at, which the prune goes by. The claim is the card's
// INSERT … ON CONFLICT DO NOTHING (changes === 1: claimed); on a conflict the
// row is read and decided as the card's table says, and a stale claim is
// taken over with a compare-and-set on the owner read. Saves and releases
// are fenced: status = 'in_flight' AND locked_at = <mine> AND token = <mine>.
// Time is the caller's (each request's now_ms, kept in microseconds).
//
// idemcheck gives each store a file of its own (the open request's addr).
// Variants re-create the classic bugs:
//
//   select-then-insert  reads the key, then INSERT OR REPLACE when it saw
//                       none (the failpoint begin.after-select between)
//   unfenced-complete   saves the response without the fence
//   unfenced-release    deletes the claim without the fence
//   no-fingerprint      never compares fingerprints
//   lock-in-process     select-then-insert under a lock in this process's
//                       memory: it holds this process's requests apart,
//                       not two processes on one file
//   token-reuse         the card's fence as written: locked_at alone is the
//                       token, and a claim made in the same millisecond as
//                       a released one gets the same token back
//
// Needs Debian's node-sqlite3 (scripts/node-sqlite3.sh makes it loadable
// by any node, and prints the NODE_PATH).

const crypto = require('crypto');
const path = require('path');
const sqlite3 = require('sqlite3');
const {serve, Fenced, InvalidKey} = require(path.join(__dirname, '..', '..', 'clients', 'node', 'idemstore.js'));

const VARIANTS = ['select-then-insert', 'unfenced-complete', 'unfenced-release', 'no-fingerprint', 'lock-in-process', 'token-reuse'];

const SCHEMA = `CREATE TABLE IF NOT EXISTS idempotency_keys (
  tenant       BLOB    NOT NULL,
  key          BLOB    NOT NULL,   -- the atomic claim (with the tenant)
  fingerprint  TEXT    NOT NULL,   -- fingerprint(params)
  status       TEXT    NOT NULL,   -- 'in_flight' | 'done'
  response     TEXT,               -- first answer, replayed
  locked_at    INTEGER NOT NULL,   -- old lock = worker probably died (µs)
  token        TEXT    NOT NULL,   -- the owner, beside locked_at: the fence
  created_at   INTEGER NOT NULL,   -- the prune goes by it (µs)
  PRIMARY KEY (tenant, key)
)`;

const WHERE = 'WHERE tenant = ? AND key = ?';
const FENCE = " AND status = 'in_flight' AND locked_at = ? AND token = ?";

function run(db, sql, args) {
  return new Promise((resolve, reject) => db.run(sql, args, function (err) { err ? reject(err) : resolve(this.changes); }));
}

function get(db, sql, args) {
  return new Promise((resolve, reject) => db.get(sql, args, (err, row) => (err ? reject(err) : resolve(row))));
}

class Store {
  async open(config) {
    this.ttl = Math.round(config.lock_ttl_ms * 1000);
    this.retention = Math.round(config.retention_ms * 1000);
    this.variant = config.variant;
    this.locks = new Map();
    this.db = await new Promise((resolve, reject) => {
      const db = new sqlite3.Database(config.addr, (err) => (err ? reject(err) : resolve(db)));
    });
    this.db.configure('busyTimeout', 5000);
    await run(this.db, 'PRAGMA journal_mode = WAL', []);
    await run(this.db, SCHEMA, []);
  }

  // A claim's token, as the harness holds it: the owner and locked_at.
  token(lockedAt) {
    if (this.variant === 'token-reuse') return String(lockedAt);
    return crypto.randomBytes(16).toString('hex') + '.' + lockedAt;
  }

  // stmt runs one statement, after the round-trip failpoint.
  async stmt(call, kind, sql, args, say) {
    await call.hit('store.round-trip');
    const out = kind === 'run' ? await run(this.db, sql, args) : await get(this.db, sql, args);
    call.trace(sql.replace(/\s+/g, ' '), say(out));
    return out;
  }

  async begin(call, key, fingerprint, nowMs) {
    if (key.rawKey.length < 1 || key.rawKey.length > 255 || key.rawTenant.length > 255) throw new InvalidKey('key must be 1-255 bytes');
    const now = Math.round(nowMs * 1000);
    if (this.variant === 'select-then-insert') return this.selectThenInsert(call, key, fingerprint, now, 'begin.after-select');
    if (this.variant === 'lock-in-process') {
      const id = key.rawTenant.toString('hex') + '/' + key.rawKey.toString('hex');
      while (this.locks.has(id)) await this.locks.get(id); // BUG: another process has its own map
      let unlock;
      this.locks.set(id, new Promise((r) => { unlock = r; }));
      try {
        return await this.selectThenInsert(call, key, fingerprint, now, 'store.round-trip');
      } finally {
        this.locks.delete(id);
        unlock();
      }
    }
    for (;;) {
      const token = this.token(now);
      const claimed = await this.stmt(call, 'run',
        `INSERT INTO idempotency_keys (tenant, key, fingerprint, status, locked_at, token, created_at)
         VALUES (?, ?, ?, 'in_flight', ?, ?, ?) ON CONFLICT (tenant, key) DO NOTHING`,
        [key.rawTenant, key.rawKey, fingerprint, now, token, now], (n) => (n === 1 ? 'claimed' : 'conflict'));
      if (claimed === 1) return {outcome: 'claimed', token};
      const d = await this.decide(call, key, fingerprint, now);
      if (d) return d;
    }
  }

  // decide reads the row and decides as the card's table says; undefined:
  // the row went away (or changed owner) meanwhile, try again.
  async decide(call, key, fingerprint, now) {
    const row = await this.stmt(call, 'get', `SELECT fingerprint, status, response, locked_at, token FROM idempotency_keys ${WHERE}`,
      [key.rawTenant, key.rawKey], (r) => (r ? r.status : 'no row'));
    if (!row) return undefined;
    if (row.fingerprint !== fingerprint && this.variant !== 'no-fingerprint') return {outcome: 'mismatch'};
    if (row.status === 'done') return {outcome: 'replay', response: JSON.parse(row.response)};
    if (now - row.locked_at < this.ttl) return {outcome: 'in-flight'};
    const token = this.token(now);
    const n = await this.stmt(call, 'run', `UPDATE idempotency_keys SET locked_at = ?, token = ? ${WHERE} AND status = 'in_flight' AND token = ?`,
      [now, token, key.rawTenant, key.rawKey, row.token], (c) => (c === 1 ? 'taken over' : 'lost the race'));
    return n === 1 ? {outcome: 'claimed', token, takeover: true} : undefined;
  }

  async selectThenInsert(call, key, fingerprint, now, point) {
    const row = await this.stmt(call, 'get', `SELECT status FROM idempotency_keys ${WHERE}`, [key.rawTenant, key.rawKey], (r) => (r ? r.status : 'no row'));
    if (row) return (await this.decide(call, key, fingerprint, now)) || {outcome: 'in-flight'};
    await call.hit(point);
    const token = this.token(now);
    await this.stmt(call, 'run', `INSERT OR REPLACE INTO idempotency_keys (tenant, key, fingerprint, status, locked_at, token, created_at)
      VALUES (?, ?, ?, 'in_flight', ?, ?, ?)`, [key.rawTenant, key.rawKey, fingerprint, now, token, now], () => 'claimed (the read saw no row)');
    return {outcome: 'claimed', token};
  }

  // fence is the WHERE of a save or release: the card's, or none.
  fence(token, unfencedVariant) {
    if (this.variant === unfencedVariant) return ['', []];
    const lockedAt = Number(token.slice(token.lastIndexOf('.') + 1));
    if (this.variant === 'token-reuse') return [" AND status = 'in_flight' AND locked_at = ?", [lockedAt]];
    return [FENCE, [lockedAt, token]];
  }

  async complete(call, key, token, response) {
    const [where, args] = this.fence(token, 'unfenced-complete');
    const n = await this.stmt(call, 'run', `UPDATE idempotency_keys SET status = 'done', response = ? ${WHERE}${where}`,
      [JSON.stringify(response), key.rawTenant, key.rawKey, ...args], (c) => (c === 1 ? 'saved' : '0 rows: fenced'));
    if (n !== 1) throw new Fenced('0 rows changed: someone took over');
  }

  async release(call, key, token) {
    const [where, args] = this.fence(token, 'unfenced-release');
    const n = await this.stmt(call, 'run', `DELETE FROM idempotency_keys ${WHERE}${where}`,
      [key.rawTenant, key.rawKey, ...args], (c) => (c === 1 ? 'deleted' : '0 rows: fenced'));
    if (n !== 1) throw new Fenced("0 rows changed: the claim isn't mine any more");
  }

  async prune(call, nowMs) {
    const now = Math.round(nowMs * 1000);
    return this.stmt(call, 'run', 'DELETE FROM idempotency_keys WHERE created_at <= ?', [now - this.retention], (n) => n + ' deleted');
  }

  async show(call, key) {
    const r = await get(this.db, `SELECT status, token, fingerprint, response FROM idempotency_keys ${WHERE}`, [key.rawTenant, key.rawKey]);
    if (!r) return 'no row';
    const tok = r.token.length > 16 ? r.token.slice(0, 16) + '…' : r.token;
    return `status=${r.status} token=${tok} fingerprint=${JSON.stringify(r.fingerprint)}` + (r.response ? ' response=' + r.response.slice(0, 60) : '');
  }

  close() {
    return new Promise((resolve) => this.db.close(() => resolve()));
  }
}

serve(new Store(), {
  name: 'card-js-sqlite', clock: 'caller', lives: 'file', show: true, waits_announced: true,
  points: ['begin.after-select', 'store.round-trip'], variants: VARIANTS,
});
