'use strict';
// idemstore: serve an idempotency-key store to idemcheck (protocol 1).
//
// idemcheck starts the store as a child process and speaks JSON lines over
// its stdin and stdout (docs/protocol.md). This module does the talking;
// the store is an object of async methods, called as requests come (many
// are in flight at once, and their answers go back in any order):
//
//   open(config)                        config: lock_ttl_ms, retention_ms,
//                                       variant, namespace, addr
//   begin(call, key, fingerprint, nowMs, leaseMs) -> decision
//       {outcome: 'claimed', token} (takeover: true over a stale claim;
//       fence: n, from 1, if the hello declares fence, and optionally
//       otherwise; lease_until_ms optionally), {outcome: 'replay',
//       response}, {outcome: 'in-flight'}, {outcome: 'mismatch'};
//       decided_at_ms for a server clock
//   complete(call, key, token, response)  throw Fenced when not the owner
//   release(call, key, token)             throw Fenced when not the owner
//   prune(call, nowMs) -> number           how many keys it removed
//   extend(call, key, token, nowMs)        only if the hello says extend
//   show(call, key) -> string              only if the hello says show
//   close()
//
// key has tenant and key as strings and rawTenant and rawKey as Buffers
// (the exact bytes: a key need not be UTF-8, so compare and store those).
// response is an object as the wire carries it: save it whole (as JSON
// text) and give it back as it was. Throw Fenced or InvalidKey for those
// answers, and NotApplied for a call your database refused as a whole (it
// certainly changed nothing); any other error is an unknown outcome. call.hit(point) waits at
// a failpoint until idemcheck says go (or kills the process there);
// call.trace(step, result) reports a statement when idemcheck asks.
//
// No dependencies beyond node itself.

const readline = require('readline');

const PROTOCOL = 1;

// Fenced: the token no longer owns the key; the write changed nothing.
class Fenced extends Error {}
Fenced.prototype.code = 'fenced';

// InvalidKey: the key is empty or longer than 255 bytes, or the tenant
// longer than 255 bytes (docs/protocol.md).
class InvalidKey extends Error {}
InvalidKey.prototype.code = 'invalid-key';

// NotApplied: the store knows the call changed nothing (its database
// refused it as a whole: a serialization failure or deadlock that rolled
// the transaction back). A definite no-op, not an unknown outcome.
class NotApplied extends Error {}
NotApplied.prototype.code = 'not-applied';

function raw(obj, name) {
  if (obj[name + '_b64'] !== undefined) return Buffer.from(obj[name + '_b64'], 'base64');
  return Buffer.from(obj[name] || '', 'utf8');
}

// Key is a tenant's key: the exact bytes, and text for messages.
function Key(obj) {
  const rawTenant = raw(obj, 'tenant');
  const rawKey = raw(obj, 'key');
  return {rawTenant, rawKey, tenant: rawTenant.toString('utf8'), key: rawKey.toString('utf8')};
}

function send(msg) {
  process.stdout.write(JSON.stringify(msg) + '\n');
}

const gos = new Map();

// Call is one request in flight: its failpoints and its trace.
class Call {
  constructor(id, tracing) {
    this.id = id;
    this.tracing = tracing;
  }

  // hit waits at the failpoint until idemcheck lets the request go on.
  hit(point) {
    return new Promise((resolve) => {
      gos.set(this.id, resolve);
      send({type: 'hit', id: this.id, point});
    });
  }

  // trace reports a statement and what it returned (only when asked).
  trace(step, result) {
    if (this.tracing) send({type: 'trace', id: this.id, step, result: result || ''});
  }
}

async function reply(id, fn) {
  let msg;
  try {
    msg = Object.assign({type: 'ok', id}, (await fn()) || {});
  } catch (e) {
    const code = e instanceof Fenced || e instanceof InvalidKey || e instanceof NotApplied ? e.code : 'other';
    if (code === 'other') process.stderr.write((e && e.stack) + '\n');
    msg = {type: 'error', id, code, message: String((e && e.message) || e || code)};
  }
  send(msg);
}

function handle(store, m) {
  const call = new Call(m.id, !!m.trace);
  switch (m.type) {
    case 'open':
      return reply(m.id, () => store.open(m.config));
    case 'begin': {
      const r = m.request;
      return reply(m.id, async () => ({decision: await store.begin(call, Key(r.key), r.fingerprint, r.now_ms, r.lease_ms || 0)}));
    }
    case 'complete':
      return reply(m.id, () => store.complete(call, Key(m.key), m.token, m.response));
    case 'release':
      return reply(m.id, () => store.release(call, Key(m.key), m.token));
    case 'prune':
      return reply(m.id, async () => ({removed: await store.prune(call, m.now_ms)}));
    case 'extend':
      return reply(m.id, () => store.extend(call, Key(m.key), m.token, m.now_ms));
    case 'show':
      return reply(m.id, async () => ({row: await store.show(call, Key(m.key))}));
    default:
      return reply(m.id, () => { throw new Error('unknown request type ' + m.type); });
  }
}

// serve says hello, then answers requests until close (or stdin ends).
// hello: name, clock ('caller' or 'server'), and as needed lives, server,
// semantics, fence, extend, show, points, waits_announced, variants.
function serve(store, hello) {
  send(Object.assign({}, hello, {type: 'hello', protocol: PROTOCOL}));
  const inflight = new Set();
  let opened = Promise.resolve();
  let closing = false;
  const rl = readline.createInterface({input: process.stdin, crlfDelay: Infinity});
  rl.on('line', (line) => {
    const m = JSON.parse(line);
    if (m.type === 'go') {
      const resolve = gos.get(m.id);
      gos.delete(m.id);
      if (resolve) resolve();
      return;
    }
    if (m.type === 'close') {
      closing = true;
      rl.close();
      Promise.all(inflight).then(() => reply(m.id, () => store.close()))
        .then(() => process.stdout.write('', () => process.exit(0)));
      return;
    }
    // Requests wait for the open to finish; then each runs on its own.
    const p = m.type === 'open' ? (opened = handle(store, m)) : opened.then(() => handle(store, m));
    inflight.add(p);
    p.finally(() => inflight.delete(p));
  });
  // stdin ended without a close: idemcheck went away; stop at once (a
  // request parked at a hit would wait forever).
  rl.on('close', () => closing || process.exit(1));
}

module.exports = {serve, Fenced, InvalidKey, NotApplied, PROTOCOL};
