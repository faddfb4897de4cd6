package httpload

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Key formats a [Request] may name; any other format is a printf-like
// pattern (see [Request.KeyFormat]).
const (
	KeyUUID = "uuid"
	KeyULID = "ulid"
)

// Body types a [Request] may name.
const (
	BodyJSON = "json"
	BodyForm = "form"
)

// Request is the request as the service under test expects it: which
// method, which headers, how the key looks, and where the order and the
// amount go in the body. The zero value is the default: POST, a UUID v4
// key, a JSON body {"order": "...", "amount": N}, the key required.
type Request struct {
	// Method is the HTTP method (default POST).
	Method string
	// Header is sent with every request (for example Authorization); a
	// Content-Type given here replaces the body type's.
	Header http.Header
	// KeyFormat is "uuid" (v4, the default), "ulid", or a pattern in
	// which %d is a sequence number unique in the run (%08d pads it), %x
	// random hex digits (%12x: twelve of them, default 16), %s the run's
	// id (so that runs against one long-lived service never share a key)
	// and %% a percent sign; every other byte is itself.
	KeyFormat string
	// BodyType is "json" (default) or "form".
	BodyType string
	// Body is the template every body starts from: a JSON object, or a
	// form (a=b&c=d); default empty.
	Body string
	// OrderAt and AmountAt are where the order (a string) and the amount
	// (an integer) go: a dotted path in the JSON object (payment.ref), or
	// a form field name. Defaults: order and amount.
	OrderAt, AmountAt string
	// KeyOptional says that the service serves a request without a key as
	// a plain request: requests without one are sent as [history]'s
	// PurposeNoKey and need no 400.
	KeyOptional bool
	// KeyHeader is the header the key goes in (default Idempotency-Key,
	// the IETF draft's; services also read X-Idempotency-Key or a name of
	// their own). A request sent without a key goes without it.
	KeyHeader string
	// KeyAt, when set, puts the key in the body instead of a header, at
	// this dotted JSON path or form field (as Square's idempotency_key):
	// a request sent without a key has no such field.
	KeyAt string
}

// DefaultKeyHeader is the header of the IETF draft, where the key goes
// unless the request names another.
const DefaultKeyHeader = "Idempotency-Key"

var patternVerb = regexp.MustCompile(`%(0?)([0-9]*)([dxs%])`)

// Normalize fills in the defaults and checks the request: a known body
// type, a template that parses, paths that do not cross a non-object,
// a key pattern that makes distinct keys (it must hold %d or %x), and
// one place for the key: a header that is a header name and not also
// among Header, or a place in the body of its own.
func (r Request) Normalize() (Request, error) {
	if r.Method == "" {
		r.Method = http.MethodPost
	}
	if r.KeyFormat == "" {
		r.KeyFormat = KeyUUID
	}
	if r.BodyType == "" {
		r.BodyType = BodyJSON
	}
	if r.KeyAt != "" && r.KeyHeader != "" {
		return r, fmt.Errorf("the key goes in the body at %q or in the header %s, not both", r.KeyAt, r.KeyHeader)
	}
	if r.KeyHeader == "" && r.KeyAt == "" {
		r.KeyHeader = DefaultKeyHeader
	}
	if r.KeyAt == "" && !headerName(r.KeyHeader) {
		return r, fmt.Errorf("key header %q is not a header name (want letters, digits and -, such as X-Idempotency-Key)", r.KeyHeader)
	}
	r.KeyHeader = http.CanonicalHeaderKey(r.KeyHeader)
	if r.KeyAt == "" && r.Header.Values(r.KeyHeader) != nil {
		return r, fmt.Errorf("the key header %s is also given with -H: the key goes there, and a request without a key must go without it", r.KeyHeader)
	}
	if r.OrderAt == "" {
		r.OrderAt = "order"
	}
	if r.AmountAt == "" {
		r.AmountAt = "amount"
	}
	if r.OrderAt == r.AmountAt || r.KeyAt == r.OrderAt || r.KeyAt == r.AmountAt {
		return r, fmt.Errorf("the order (at %q), the amount (at %q) and a key in the body (at %q) each need a place of their own", r.OrderAt, r.AmountAt, r.KeyAt)
	}
	if err := r.distinctPaths(); err != nil {
		return r, err
	}
	switch r.KeyFormat {
	case KeyUUID, KeyULID:
	default:
		verbs := patternVerb.FindAllStringSubmatch(r.KeyFormat, -1)
		unique := false
		for _, v := range verbs {
			unique = unique || v[3] == "d" || v[3] == "x"
		}
		if !unique {
			return r, fmt.Errorf("key format %q: want uuid, ulid, or a pattern with %%d (a sequence number) or %%x (random hex)", r.KeyFormat)
		}
	}
	switch r.BodyType {
	case BodyJSON, BodyForm:
	default:
		return r, fmt.Errorf("body type %q: want json or form", r.BodyType)
	}
	b, err := r.body("o", 1)
	if err == nil && r.KeyAt != "" {
		_, err = r.withKey(b, "k")
	}
	return r, err
}

// headerName reports whether s is a header field name: one or more of
// RFC 9110's token characters.
func headerName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// distinctPaths checks that a JSON body's paths (the order's, the
// amount's, and the key's when it goes in the body) name distinct places:
// no empty name in any (a..b, .a, a.), and none inside another (with the
// amount at payment and the order at payment.ref, the amount would
// overwrite the object that holds the order, and every request would go
// without one). A form's names are taken whole, dots and all.
func (r Request) distinctPaths() error {
	if r.BodyType == BodyForm {
		return nil
	}
	named := []string{r.OrderAt, r.AmountAt}
	if r.KeyAt != "" {
		named = append(named, r.KeyAt)
	}
	paths := make([][]string, len(named))
	for i, n := range named {
		paths[i] = strings.Split(n, ".")
		if slices.Contains(paths[i], "") {
			return fmt.Errorf("JSON path %q: an empty name (want names joined by single dots, such as payment.ref)", n)
		}
	}
	for i := range paths {
		for j := i + 1; j < len(paths); j++ {
			short, long := paths[i], paths[j]
			if len(short) > len(long) {
				short, long = long, short
			}
			if slices.Equal(short, long[:len(short)]) {
				return fmt.Errorf("JSON paths %q and %q: %q is inside %q, so one value would overwrite the other", named[i], named[j], strings.Join(long, "."), strings.Join(short, "."))
			}
		}
	}
	return nil
}

// body builds one request body from the template.
func (r Request) body(order string, amount int) (string, error) {
	if r.BodyType == BodyForm {
		v, err := url.ParseQuery(r.Body)
		if err != nil {
			return "", fmt.Errorf("form body template %q: %v", r.Body, err)
		}
		v.Set(r.OrderAt, order)
		v.Set(r.AmountAt, strconv.Itoa(amount))
		return v.Encode(), nil
	}
	obj := map[string]any{}
	if strings.TrimSpace(r.Body) != "" {
		var err error
		if obj, err = object(r.Body); err != nil {
			return "", fmt.Errorf("JSON body template %q: %v", r.Body, err)
		}
	}
	if err := setPath(obj, r.OrderAt, order); err != nil {
		return "", err
	}
	if err := setPath(obj, r.AmountAt, amount); err != nil {
		return "", err
	}
	b, err := json.Marshal(obj)
	return string(b), err
}

// withKey is body (as [Request.body] made it) with the key at KeyAt.
func (r Request) withKey(body, key string) (string, error) {
	if r.BodyType == BodyForm {
		v, err := url.ParseQuery(body)
		if err != nil {
			return "", err
		}
		v.Set(r.KeyAt, key)
		return v.Encode(), nil
	}
	obj, err := object(body)
	if err != nil {
		return "", err
	}
	if err := setPath(obj, r.KeyAt, key); err != nil {
		return "", err
	}
	b, err := json.Marshal(obj)
	return string(b), err
}

// object decodes s, which must be one JSON object and nothing after it,
// its numbers kept as written (json.Number: a float64 would round an id
// of 20 digits).
func object(s string) (map[string]any, error) {
	var obj map[string]any
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(&obj); err != nil {
		return nil, fmt.Errorf("want an object: %v", err)
	}
	if d.More() || obj == nil { // null decodes to no map at all
		return nil, errors.New("want one object, with nothing after it")
	}
	return obj, nil
}

// setPath sets obj's value at a dotted path, making the objects on the
// way.
func setPath(obj map[string]any, path string, v any) error {
	parts := strings.Split(path, ".")
	for i, p := range parts[:len(parts)-1] {
		next, ok := obj[p]
		if !ok {
			m := map[string]any{}
			obj[p] = m
			obj = m
			continue
		}
		m, ok := next.(map[string]any)
		if !ok {
			return fmt.Errorf("JSON path %q: %s is not an object in the template", path, strings.Join(parts[:i+1], "."))
		}
		obj = m
	}
	obj[parts[len(parts)-1]] = v
	return nil
}

// contentType is the Content-Type of the body type.
func (r Request) contentType() string {
	if r.BodyType == BodyForm {
		return "application/x-www-form-urlencoded"
	}
	return "application/json"
}

// keys makes a run's keys in the request's format.
type keys struct {
	format string
	runID  string
	seq    *atomic.Int64
	rng    *rand.Rand
}

// newKeys makes one client's key maker: its randomness comes from the
// seed, the run's id and the client, so that two runs with one seed do
// not send the same keys to a service that remembers them.
func newKeys(format, runID string, seed int64, client int, seq *atomic.Int64) *keys {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s/%d/%d", runID, seed, client)))
	return &keys{format: format, runID: runID, seq: seq, rng: rand.New(rand.NewSource(int64(binary.LittleEndian.Uint64(h[:8]))))}
}

func (k *keys) next() string {
	switch k.format {
	case KeyUUID:
		var b [16]byte
		k.rng.Read(b[:])
		b[6] = b[6]&0x0f | 0x40 // version 4
		b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	case KeyULID:
		return ulid(uint64(time.Now().UnixMilli()), k.rng)
	}
	return patternVerb.ReplaceAllStringFunc(k.format, func(v string) string {
		m := patternVerb.FindStringSubmatch(v)
		width, _ := strconv.Atoi(m[2])
		switch m[3] {
		case "%":
			return "%"
		case "s":
			return k.runID
		case "d":
			return fmt.Sprintf("%"+m[1]+m[2]+"d", k.seq.Add(1))
		}
		if width == 0 {
			width = 16
		}
		var sb strings.Builder
		for sb.Len() < width {
			fmt.Fprintf(&sb, "%x", k.rng.Intn(16))
		}
		return sb.String()
	})
}

// ulid makes a ULID: 48 bits of milliseconds and 80 random bits, in
// Crockford's base 32 (26 characters).
func ulid(ms uint64, rng *rand.Rand) string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], ms<<16)
	rng.Read(b[6:])
	// 128 bits as 26 base-32 digits: the first digit holds 3 bits.
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	out := make([]byte, 26)
	for i := 25; i >= 0; i-- {
		out[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out)
}
