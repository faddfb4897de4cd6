// A payment API in Node with Express 4: the worked example of idemcheck's
// black-box mode for a service whose request is not idemcheck's default.
//
// POST /v1/payments takes a form body (reference=...&amount_cents=...&
// currency=EUR), wants "Authorization: Bearer test-token", and accepts
// only UUID v4 Idempotency-Keys; it charges the reference once at the
// payment provider whose URL is in IDEM_PROVIDER_URL and answers 201 with
// its own payment id (never the provider's charge id). Test it with flags
// alone:
//
//   idemcheck http --cmd "NODE_PATH=/usr/share/nodejs node examples/nodesvc/server.js correct" \
//     --instances 2 --path /v1/payments -H "Authorization: Bearer test-token" \
//     --body-type form --body currency=EUR --order-at reference --amount-at amount_cents
//
// The first argument chooses the idempotency middleware:
//
//   - correct: records in files that every instance on this machine shares
//     (IDEM_STORE_DIR, default a directory per IDEM_NAMESPACE under the
//     temporary directory): the key claimed atomically (O_EXCL), the body
//     fingerprinted, the provider's error saved and replayed, a claim
//     older than LOCK_TTL taken over; async errors reach Express's error
//     handler;
//   - article: the seed article's middleware as written: a Map in this
//     process, the key deleted and the error rethrown when the handler
//     fails; Express 4 does not catch a rejected promise, so the first
//     provider error crashes Node (an unhandled rejection), and the retry
//     charges again;
//   - memory-map: correct middleware over a Map in this process: another
//     instance, or this one restarted, does not know the key;
//   - no-fingerprint: correct middleware that never compares bodies: a key
//     reused with another body gets the old answer, not 422.
'use strict';

const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const express = require('express');

const VARIANTS = ['correct', 'article', 'memory-map', 'no-fingerprint'];
const variant = process.argv[2] || 'correct';
if (!VARIANTS.includes(variant)) {
  console.error(`nodesvc: unknown variant ${variant} (known: ${VARIANTS.join(', ')})`);
  process.exit(2);
}
const PORT = Number(process.env.PORT);
const PROVIDER = process.env.IDEM_PROVIDER_URL;
const INSTANCE = process.env.IDEM_INSTANCE || 'node';
const LOCK_TTL = 5000; // ms; longer than CHARGE_TIMEOUT, so no honest charge outlives its claim
const CHARGE_TIMEOUT = 2000;
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
if (!PORT || !PROVIDER) {
  console.error('nodesvc: PORT and IDEM_PROVIDER_URL must be set');
  process.exit(2);
}

// One charge at the provider: one effect. It throws when the provider
// fails, as payment SDKs do.
let paid = 0;
async function charge(req) {
  const body = req.body;
  const res = await fetch(PROVIDER, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ order: body.reference }),
    signal: AbortSignal.timeout(CHARGE_TIMEOUT),
  });
  if (!res.ok) throw new Error(`provider answered ${res.status}`);
  await res.json();
  paid += 1;
  return { code: 201, body: { payment_id: `pay_${INSTANCE}_${process.pid}_${paid}`, status: 'succeeded', amount_cents: Number(body.amount_cents) } };
}

const fingerprint = (req) =>
  crypto.createHash('sha256').update(`${req.method} ${req.path} ${JSON.stringify(req.body)}`).digest('hex');

// --- the seed article's middleware, as written --------------------------
const articleStore = new Map();
function articleIdempotent(handler) {
  return async (req, res) => {
    const key = req.header('Idempotency-Key');
    if (!key) return res.status(400).json({ error: 'Idempotency-Key header is required' });
    const fp = fingerprint(req);
    const existing = articleStore.get(key);
    if (existing) {
      if (existing.fingerprint !== fp) return res.status(422).json({ error: 'Key reused with a different request' });
      if (existing.status === 'in_progress') return res.status(409).json({ error: 'Request already in progress' });
      return res.status(existing.code).json(existing.body);
    }
    articleStore.set(key, { fingerprint: fp, status: 'in_progress' });
    try {
      const { code, body } = await handler(req);
      articleStore.set(key, { fingerprint: fp, status: 'done', code, body });
      return res.status(code).json(body);
    } catch (err) {
      articleStore.delete(key); // "let the client retry an operation that never happened"
      throw err; // Express 4 never sees this rejection: Node crashes
    }
  };
}

// --- stores for the other middlewares ------------------------------------
// A store answers begin(key, fp) with {claimed: token}, {replay: rec},
// {inFlight: true} or {mismatch: true}, and complete(key, token, rec).
class MapStore {
  constructor() { this.m = new Map(); }
  begin(key, fp) {
    const cur = this.m.get(key);
    const token = crypto.randomUUID();
    if (!cur) { this.m.set(key, { fp, state: 'in_progress', token, at: Date.now() }); return { claimed: token }; }
    if (fp !== null && cur.fp !== fp) return { mismatch: true };
    if (cur.state === 'done') return { replay: cur };
    return { inFlight: true };
  }
  complete(key, token, rec) {
    const cur = this.m.get(key);
    if (!cur || cur.token !== token) return false;
    this.m.set(key, { ...cur, ...rec, state: 'done' });
    return true;
  }
}

// FileStore keeps one JSON file per key in a directory every instance
// shares. A claim is an exclusive create (O_EXCL: one process wins); an
// answer replaces the file by a rename (atomic), after checking that the
// claim is still ours; a stale claim is taken over by renaming it away
// (one process wins the rename) and claiming again.
class FileStore {
  constructor(dir) { this.dir = dir; fs.mkdirSync(dir, { recursive: true }); }
  file(key) { return path.join(this.dir, crypto.createHash('sha256').update(key).digest('hex') + '.json'); }
  read(f) { try { return JSON.parse(fs.readFileSync(f, 'utf8')); } catch { return null; } }
  begin(key, fp) {
    const f = this.file(key);
    const token = crypto.randomUUID();
    const claim = JSON.stringify({ fp, state: 'in_progress', token, at: Date.now() });
    try { fs.writeFileSync(f, claim, { flag: 'wx' }); return { claimed: token }; } catch (e) { if (e.code !== 'EEXIST') throw e; }
    const cur = this.read(f);
    if (!cur) return { inFlight: true }; // being written by its claimant
    if (fp !== null && cur.fp !== fp) return { mismatch: true };
    if (cur.state === 'done') return { replay: cur };
    if (Date.now() - cur.at < LOCK_TTL) return { inFlight: true };
    const away = `${f}.stale-${token}`;
    try { fs.renameSync(f, away); } catch { return { inFlight: true }; }
    const taken = this.read(away);
    fs.rmSync(away, { force: true });
    if (!taken || taken.token !== cur.token) return { inFlight: true }; // not the stale claim we judged: lost a race
    try { fs.writeFileSync(f, claim, { flag: 'wx' }); return { claimed: token }; } catch { return { inFlight: true }; }
  }
  complete(key, token, rec) {
    const f = this.file(key);
    const cur = this.read(f);
    if (!cur || cur.token !== token) return false; // taken over: not ours to save
    const tmp = `${f}.${token}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify({ ...cur, ...rec, state: 'done' }));
    fs.renameSync(tmp, f);
    return true;
  }
}

function idempotent(store, checkBody, handler) {
  return async (req, res) => {
    const key = req.header('Idempotency-Key');
    if (!key || !UUID_V4.test(key)) return res.status(400).json({ error: 'Idempotency-Key must be a UUID v4' });
    const got = store.begin(key, checkBody ? fingerprint(req) : null);
    if (got.mismatch) return res.status(422).json({ error: 'Key reused with a different request' });
    if (got.inFlight) return res.status(409).json({ error: 'Request already in progress' });
    if (got.replay) return res.status(got.replay.code).json(got.replay.body);
    let out;
    try {
      out = await handler(req);
    } catch (err) {
      // The charge may have gone through: save the error, never run again.
      out = { code: 502, body: { error: `payment failed: ${err.message}; it may have gone through` } };
    }
    if (!store.complete(key, got.claimed, out)) return res.status(409).json({ error: 'claim taken over' });
    return res.status(out.code).json(out.body);
  };
}

// Express 4 does not catch a rejected promise: route async handlers to
// the error handler.
const wrap = (fn) => (req, res, next) => fn(req, res).catch(next);

const app = express();
app.use(express.urlencoded({ extended: false }));
app.get('/', (_req, res) => res.send('nodesvc: POST /v1/payments\n'));
app.use('/v1', (req, res, next) => {
  if (req.header('Authorization') !== 'Bearer test-token') return res.status(401).json({ error: 'unauthorized' });
  if (!req.body || !req.body.reference || !/^[0-9]+$/.test(req.body.amount_cents || '')) {
    return res.status(400).json({ error: 'want a form body reference=...&amount_cents=N' });
  }
  return next();
});

const ns = process.env.IDEM_NAMESPACE || 'nodesvc';
const dir = process.env.IDEM_STORE_DIR || path.join(os.tmpdir(), 'idem-nodesvc', ns);
switch (variant) {
  case 'article':
    app.post('/v1/payments', articleIdempotent(charge)); // unwrapped, as in the article
    break;
  case 'memory-map':
    app.post('/v1/payments', wrap(idempotent(new MapStore(), true, charge)));
    break;
  case 'no-fingerprint':
    app.post('/v1/payments', wrap(idempotent(new FileStore(dir), false, charge)));
    break;
  default:
    app.post('/v1/payments', wrap(idempotent(new FileStore(dir), true, charge)));
}
app.use((err, _req, res, _next) => res.status(500).json({ error: err.message }));
app.listen(PORT, '127.0.0.1', () => console.log(`nodesvc ${variant} on 127.0.0.1:${PORT}`));
