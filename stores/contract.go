// Package stores defines the contract every idempotency-key store implements,
// the Run flow built on it (the lesson card's run()), the errors a caller acts
// on, and the registry of backends and their variants (correct and mutants).
package stores

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Outcome is what Begin decided for a request.
type Outcome int

// The four outcomes of Begin, as in the decision table of docs/DESIGN.md §1.
const (
	// Claimed: the caller owns the key and must run the work (HTTP: run).
	Claimed Outcome = iota + 1
	// Replay: the key is done with the same fingerprint; the saved response
	// is returned and the work does not run.
	Replay
	// InFlight: another owner holds a live claim; retry later (HTTP 409).
	InFlight
	// Mismatch: the key was used with other parameters; never retry (HTTP 422).
	Mismatch
)

// String names the outcome the way reports and traces print it.
func (o Outcome) String() string {
	switch o {
	case Claimed:
		return "claimed"
	case Replay:
		return "replay"
	case InFlight:
		return "in-flight"
	case Mismatch:
		return "mismatch"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// HTTPStatus is the status code an API answers for the outcome when the
// work does not run (0 for Claimed and Replay, which answer with a response).
func (o Outcome) HTTPStatus() int {
	switch o {
	case InFlight:
		return 409
	case Mismatch:
		return 422
	}
	return 0
}

// MaxKeyLen is the longest key a store accepts, in bytes (Stripe's limit).
const MaxKeyLen = 255

// Token is a fencing token: proof that the caller still owns a claim. A
// correct store never hands out the same token twice for one key, across the
// key's whole life (claims, releases, prunes, takeovers).
type Token string

// tokenJSON is a Token's JSON form when it is not valid UTF-8.
type tokenJSON struct {
	B64 []byte `json:"b64"`
}

// MarshalJSON writes the token as a JSON string, or as {"b64": …} when
// it is not valid UTF-8: a store may make its tokens of raw bytes, and
// encoding/json would replace the invalid ones, so that two tokens of a
// saved history (or of a worker process's stream) could read back as one
// and fencing would see a token repeated.
func (t Token) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(t)) {
		return json.Marshal(string(t))
	}
	return json.Marshal(tokenJSON{B64: []byte(t)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (t *Token) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		var j tokenJSON
		if err := json.Unmarshal(b, &j); err != nil {
			return fmt.Errorf("token: %w", err)
		}
		*t = Token(j.B64)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*t = Token(s)
	return nil
}

// Response is the answer saved by Complete and replayed to later requests.
// Body is any bytes, as an HTTP body may be: a store saves it and replays
// it byte for byte. The harness's answers are text (valid UTF-8: a store
// may keep them in a text column) with characters a careless store loses:
// quotes, a backslash, an emoji, "\r\n", trailing blanks, more than 255
// characters (see workload.Order.Tail).
type Response struct {
	Status int    `json:"status"`
	Body   string `json:"body"`
}

// responseJSON is Response's JSON form: the body as a string when it is
// valid UTF-8, else base64 (encoding/json would replace invalid bytes, and
// a saved history would then show two different answers as one).
type responseJSON struct {
	Status  int     `json:"status"`
	Body    *string `json:"body,omitempty"`
	BodyB64 *string `json:"body_b64,omitempty"`
}

// MarshalJSON writes {"status","body"}, or body_b64 for invalid UTF-8.
func (r Response) MarshalJSON() ([]byte, error) {
	j := responseJSON{Status: r.Status}
	j.Body, j.BodyB64 = textOrB64(r.Body)
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Response) UnmarshalJSON(b []byte) error {
	var j responseJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	body, err := fromTextOrB64(j.Body, j.BodyB64, "body_b64")
	*r = Response{Status: j.Status, Body: body}
	return err
}

// KeyRef names a key within its tenant; keys never collide across tenants.
type KeyRef struct {
	Tenant string `json:"tenant"`
	Key    string `json:"key"`
}

// String prints tenant/key, each part bare when it is plain text (valid,
// printable UTF-8 with no '/', '"' or surrounding space) and quoted (Go
// syntax) otherwise, so that two different keys never print alike:
// t0/order-1, "t0/x"/order-1, t0/"x/order-1", t0/"order-1 ". A part with
// a combining mark is quoted in ASCII: "café" decomposed (an e and an
// acute accent) printed as the composed one does, and a report listed
// two keys as one (t0/café-000, t0/"cafe\u0301-000" now).
func (k KeyRef) String() string { return keyPart(k.Tenant) + "/" + keyPart(k.Key) }

func keyPart(s string) string {
	if s == "" || !utf8.ValidString(s) || strings.TrimSpace(s) != s || strings.ContainsAny(s, "/\"") {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if unicode.Is(unicode.M, r) {
			return strconv.QuoteToASCII(s)
		}
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// keyJSON is KeyRef's JSON form: tenant and key as strings when they are
// valid UTF-8, else base64 (JSON cannot carry arbitrary bytes, and
// encoding/json would replace invalid ones, merging distinct keys in a
// saved history).
type keyJSON struct {
	Tenant    *string `json:"tenant,omitempty"`
	Key       *string `json:"key,omitempty"`
	TenantB64 *string `json:"tenant_b64,omitempty"`
	KeyB64    *string `json:"key_b64,omitempty"`
}

// MarshalJSON writes {"tenant","key"}, or base64 for invalid UTF-8.
func (k KeyRef) MarshalJSON() ([]byte, error) {
	var j keyJSON
	j.Tenant, j.TenantB64 = textOrB64(k.Tenant)
	j.Key, j.KeyB64 = textOrB64(k.Key)
	return json.Marshal(j)
}

// textOrB64 is s for a JSON field pair: as text when it is valid UTF-8,
// else as base64 (encoding/json would replace the invalid bytes).
func textOrB64(s string) (text, b64 *string) {
	if utf8.ValidString(s) {
		return &s, nil
	}
	b := base64.StdEncoding.EncodeToString([]byte(s))
	return nil, &b
}

// fromTextOrB64 reads what textOrB64 wrote ("" when neither is set);
// field names the base64 field in an error.
func fromTextOrB64(text, b64 *string, field string) (string, error) {
	switch {
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
		return string(b), nil
	case text != nil:
		return *text, nil
	}
	return "", nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (k *KeyRef) UnmarshalJSON(b []byte) error {
	var j keyJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	tenant, err := fromTextOrB64(j.Tenant, j.TenantB64, "tenant_b64")
	if err != nil {
		return err
	}
	key, err := fromTextOrB64(j.Key, j.KeyB64, "key_b64")
	if err != nil {
		return err
	}
	*k = KeyRef{Tenant: tenant, Key: key}
	return nil
}

// Request is one Begin call: the key, a fingerprint of the request's
// parameters, and the caller's clock reading (used by stores that take time
// from the caller; server-clock stores ignore it).
type Request struct {
	KeyRef
	Fingerprint string    `json:"fingerprint"`
	Now         time.Time `json:"now"`
	// Lease, when positive, is this claim's lease instead of LockTTL, for
	// stores that declare Semantics.PerRequestLease (the others ignore it).
	Lease time.Duration `json:"lease,omitempty"`
}

// Decision is Begin's answer. DecidedAt is the clock reading the store decided
// with (the caller's Now, or the server's clock), so a checker can verify the
// staleness decision against the model.
//
// A claim may also carry, beside its opaque Token, what the store says of
// it as fields: its fencing number and the end of its lease. A store whose
// token is made of several parts (an owner id, a fence, a lease) then
// need not pack them into one string for the harness to read them back.
// Both are optional; the zero value says nothing.
type Decision struct {
	Outcome   Outcome   `json:"outcome"`
	Token     Token     `json:"token,omitempty"`    // set when Claimed
	Takeover  bool      `json:"takeover,omitempty"` // Claimed over a stale claim
	Response  Response  `json:"response"`           // set when Replay
	DecidedAt time.Time `json:"decided_at"`
	// Fence is a claim's fencing number, for a store that gives it as a
	// field (0: none given; numbers given so start at 1). The harness
	// holds it to the store's fence as it would a Fence func's number
	// (see FenceOf): a store that gives it needs no Fence.
	Fence uint64 `json:"fence,omitempty"`
	// LeaseUntil is when the claim's lease runs out by the store's clock,
	// for a store that says (zero: not said). The model test prints it
	// beside the lease the model gives the claim.
	LeaseUntil time.Time `json:"lease_until,omitzero"`
}

// Store is the contract of docs/DESIGN.md §1. Each method is one round trip to the
// server and atomic: concurrent callers on one key see one of the outcomes of
// the decision table, never a mix.
type Store interface {
	// Begin claims the key, or says why not (Replay, InFlight, Mismatch).
	Begin(ctx context.Context, req Request) (Decision, error)
	// Complete saves the response and marks the key done, only while the
	// key is in flight under token; otherwise it returns ErrFenced.
	Complete(ctx context.Context, key KeyRef, token Token, resp Response) error
	// Release deletes the claim, only while the key is in flight under
	// token; otherwise it returns ErrFenced and leaves the key alone.
	Release(ctx context.Context, key KeyRef, token Token) error
	// Prune removes keys older than the store's retention as of now (the
	// caller's clock for caller-clock stores; server-clock stores use their
	// own) and says how many it removed.
	Prune(ctx context.Context, now time.Time) (int, error)
	// Close releases the store's connections.
	Close() error
}

// Errors a caller acts on.
var (
	// ErrFenced: the write came from a token that no longer owns the key
	// (someone took over, or the claim is gone). The caller answers 409.
	ErrFenced = errors.New("fenced: the claim is no longer held by this token")
	// ErrInvalidKey: the key is empty or longer than MaxKeyLen bytes (HTTP 400).
	ErrInvalidKey = errors.New("invalid idempotency key: must be 1-255 bytes")
)

// ValidateKey returns an error wrapping ErrInvalidKey unless the key is 1 to
// MaxKeyLen bytes long. The tenant is validated the same way.
func ValidateKey(k KeyRef) error {
	if n := len(k.Key); n == 0 || n > MaxKeyLen {
		return fmt.Errorf("%w (got %d bytes)", ErrInvalidKey, n)
	}
	if n := len(k.Tenant); n > MaxKeyLen {
		return fmt.Errorf("%w: tenant longer than %d bytes (got %d)", ErrInvalidKey, MaxKeyLen, n)
	}
	return nil
}

// Config is what every backend needs besides its connection.
type Config struct {
	// LockTTL: an in-flight claim older than this is stale and may be taken
	// over. It must outlast any honest run of the work.
	LockTTL time.Duration
	// Retention: keys younger than this are never pruned. It must exceed
	// the clients' retry window.
	Retention time.Duration
	// Variant is "correct" or the name of a mutant of the backend.
	Variant string
	// Namespace isolates this store's keys from other stores on the same
	// server, so tests can make many fresh stores cheaply: a schema in
	// Postgres, a key prefix in Redis; SQLite and memory (one store per
	// file or process) ignore it. Letters, digits and underscores only.
	Namespace string
	// Statements, if set, is applied by a backend made of statements or
	// scripts (SQLite, Postgres, Redis) to each of them once, when the
	// store opens: it gets the statement's name (stable per backend, e.g.
	// "complete") and its text, and returns the text to run. It is how
	// `idemcheck mutate` makes a generated mutant: one text edit of one
	// statement, with the store's Go code unchanged. The text is the
	// backend's own, before any per-store rendering that varies between
	// opens (Postgres's schema and table stay {s} and {t}). nil: every
	// statement runs as written. A backend whose logic is Go code (memory,
	// lease) ignores it; see stores.Backend.Statements.
	Statements func(name, text string) string `json:"-"`
	// Edit, if set, replaces one statement's text before Statements sees
	// it: the hook's one-edit form as data, which crosses into worker
	// processes with the rest of the Config (a func does not), so a
	// generated mutant runs in every process of a scenario.
	Edit *Edit `json:"edit,omitempty"`
}

// Edit is one statement's text replaced: Text for Orig, in the statement
// named Statement. A statement whose text is not Orig is left alone, so an
// edit never changes a statement it was not made from.
type Edit struct {
	Statement string `json:"statement"`
	Orig      string `json:"orig"`
	Text      string `json:"text"`
}

// Hooked reports whether c changes any statement's text (Statements or
// Edit set): a backend may skip its hook pass otherwise.
func (c Config) Hooked() bool { return c.Statements != nil || c.Edit != nil }

// Statement returns the text a backend runs for the named statement:
// text, with c.Edit applied and passed through c.Statements when they are
// set.
func (c Config) Statement(name, text string) string {
	if e := c.Edit; e != nil && e.Statement == name && e.Orig == text {
		text = e.Text
	}
	if c.Statements == nil {
		return text
	}
	return c.Statements(name, text)
}

// Validate reports a configuration no store can honour.
func (c Config) Validate() error {
	if c.LockTTL <= 0 {
		return fmt.Errorf("lock TTL must be positive, got %v", c.LockTTL)
	}
	if c.Retention <= 0 {
		return fmt.Errorf("retention must be positive, got %v", c.Retention)
	}
	for _, r := range c.Namespace {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return fmt.Errorf("namespace %q: letters, digits and underscores only", c.Namespace)
		}
	}
	return nil
}

// MarshalJSON writes the request whole (KeyRef's own MarshalJSON, which
// the embedding would promote, writes only the key).
func (r Request) MarshalJSON() ([]byte, error) {
	return json.Marshal(requestJSON{Key: r.KeyRef, Fingerprint: r.Fingerprint, Now: r.Now, Lease: r.Lease})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Request) UnmarshalJSON(b []byte) error {
	var j requestJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Request{KeyRef: j.Key, Fingerprint: j.Fingerprint, Now: j.Now, Lease: j.Lease}
	return nil
}

type requestJSON struct {
	Key         KeyRef        `json:"key"`
	Fingerprint string        `json:"fingerprint"`
	Now         time.Time     `json:"now"`
	Lease       time.Duration `json:"lease,omitempty"`
}

// ErrLateClaim is wrapped by the error of a Begin that claimed the key
// but took too long to answer (see BeginInTime). The lease starts when the
// store decides, and a commit that then waits (for a synchronous standby,
// for WAIT) eats into it: an owner told late could start its work after
// its lease ran out, while another takes the key over. The claim stays
// (it goes stale after LockTTL, and is taken over); the caller holds an
// unknown outcome and retries with the same key.
var ErrLateClaim = errors.New("the claim took most of its LockTTL to commit: not handed out, its lease may be gone")

// BeginInTime runs begin, a store's Begin, and hands out a claim only if
// it came back within lateAfter; a later claim is ErrLateClaim, an
// unknown outcome. Other answers are returned as they are. The replicated
// stores use it, whose commits wait for a standby. (Giving the late claim
// back and asking again would not do: other clients may have seen it, and
// a claim that vanishes without a Release is, to them, a lost claim.)
func BeginInTime(key KeyRef, lateAfter time.Duration, begin func() (Decision, error)) (Decision, error) {
	t0 := time.Now()
	d, err := begin()
	if took := time.Since(t0); err == nil && d.Outcome == Claimed && took >= lateAfter {
		return Decision{}, fmt.Errorf("begin %s: %w (it took %v, LockTTL allows %v)", key, ErrLateClaim, took.Round(time.Millisecond), lateAfter)
	}
	return d, err
}
