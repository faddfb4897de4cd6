package main

import "time"

// httpHelp is idemcheck http's help: its flags, what it sends, what it
// judges.
const httpHelp = `Usage: idemcheck http --target URL [--target URL ...] [flags]
       idemcheck http --cmd "command" [--instances N] [--server redis|postgres] [flags]
       idemcheck http --config FILE [flags]

Tests an HTTP service's Idempotency-Key handling from outside.

Concurrent clients send orders with an Idempotency-Key header to the
service's instances, each behind its own fault proxy (latency, resets,
lost replies); they retry with the same key, reuse keys with other bodies,
and send missing and over-long keys. The service charges each order at a
fake payment provider that idemcheck serves on 127.0.0.1 (its URL is in
IDEM_PROVIDER_URL when idemcheck starts the instances, or at
--provider-port): POST {"order": "<the order>"} (or a form order=...), and
it answers {"charge": "ch_N"}, or 503 for a failure it draws after the
charge went through; a charge with an Idempotency-Key header is made once
per key, as at a real provider (a retry with the key gets that charge).
Its ledger is the witness: at most one charge per order, replay
fidelity, 400/409/422 as the Idempotency-Key draft says, and
liveness once the faults heal (a 409, 423, 429, or a 5xx the provider
does not explain, after healing, is a stuck key). A run in which most keys
got no success fails first: nothing was tested.

The request as the service expects it (docs/http-requests.md):
  --method POST --path /orders -H "Authorization: Bearer x" (repeatable)
  --key-format uuid|ulid|PATTERN   (PATTERN: %d sequence, %x random hex,
        %s the run's id; e.g. "pay_%s_%06d")
  --key-header NAME        the header the key goes in (default
        Idempotency-Key; e.g. X-Idempotency-Key), or --key-at PATH: in
        the body instead (a JSON path or form field, e.g. idempotency_key)
  --body '{"payment":{"currency":"EUR"}}' --order-at payment.ref
        --amount-at payment.cents   (JSON paths), or --body-type form
        --body "currency=EUR" --order-at ref --amount-at cents
  --key required|optional  --max-key-len N (0: no limit)
  --inflight-ttl D         how long a key stays in flight after its owner
        died or gave up (answered 5xx, 202 or 408, or not at all): the
        final probes (--settle) may run that long (they end once every
        key is settled)
  --saves-errors           every 5xx is saved and replayed for its key
        (Stripe): a key that replays one 5xx is settled
  --replay-any-2xx         a success is replayed with its body but perhaps
        another 2xx (201, then 200: PayPal): replays compared by body

Targets, either:
  --target URL [--target URL ...]   instances someone else started
  --cmd "command" --instances N     idemcheck starts N (at most 16) instances, each with
        PORT (also "{port}" in the command), IDEM_PROVIDER_URL, IDEM_INSTANCE
        and IDEM_NAMESPACE set, and kills, pauses and restarts them
  --config FILE                     the same as JSON: {"targets": [...]} or
        {"cmd": "...", "instances": N, "path": "/orders", "server": "redis"},
        and the request: "method", "headers": ["Name: value"], "key_format",
        "key_header", "key_at", "body", "body_type", "order_at", "amount_at",
        "key", "max_key_len", "inflight_ttl", "settle", "saves_errors",
        "replay_any_2xx"

An instance started with --cmd that exits by itself is recorded (time,
exit status, the tail of its log), restarted, and the run goes on.

Exit codes: 0 every checker passed (or, with --expect, the expected checker
failed), 1 a violation (or, with --expect, it did not show), 2 bad usage, a
bad target, or a service that never answered, 3 interrupted, or undecided:
no violation, but something seen was not judged (such as a key still in
flight after its owner was killed or answered 5xx, with no --inflight-ttl
declared).
`

// The bounds of idemcheck http's flags, so that no setting exhausts the
// machine: each instance is a process of the service beside its fault
// proxy, and the run holds its history in memory until it ends (many
// runs, not one long one, make a soak: make soak-http).
const (
	maxInstances    = 16
	maxHTTPDuration = time.Hour
	maxAttempts     = 100
)
