package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/idemcheck/idemcheck/harness/httpcheck"
	"github.com/idemcheck/idemcheck/harness/httpload"
)

// declarations says, one line each, the request and the policy the run
// assumed, and what each declaration widens: the report prints them.
// host is the Host header every request carries ("": each target's own).
func declarations(r httpload.Request, path string, started bool, maxKey int, p httpcheck.Policy, host string, instances int) []string {
	ttl, settle := p.InFlightTTL, p.Settle
	where := "each --target URL"
	if started {
		where = path
	}
	body := fmt.Sprintf("a JSON body %s with the order at %q and the amount at %q", orNone(r.Body), r.OrderAt, r.AmountAt)
	if r.BodyType == httpload.BodyForm {
		body = fmt.Sprintf("a form body %s with the order in %q and the amount in %q", orNone(r.Body), r.OrderAt, r.AmountAt)
	}
	out := []string{fmt.Sprintf("request: %s %s, %s", r.Method, where, body)}
	if len(r.Header) > 0 {
		names := make([]string, 0, len(r.Header))
		for n := range r.Header {
			names = append(names, n)
		}
		slices.Sort(names)
		out = append(out, "headers: "+strings.Join(names, ", ")+" (values not shown)")
	}
	// Stripe scopes a key to its account: a run of one caller cannot
	// tell a key so scoped from one shared by every caller.
	out = append(out, "callers: one (every request carries the same headers): not tested whether a key is scoped to its caller (an account's key sent by another account)")
	if _, chosen := r.Header["Host"]; host != "" && (instances > 1 || chosen) {
		out = append(out, fmt.Sprintf("host: every request carries Host: %s, whichever instance it goes to (one name for the service, as a load balancer in front of it presents)", host))
	}
	kf := r.KeyFormat
	switch kf {
	case httpload.KeyUUID:
		kf = "UUID v4"
	case httpload.KeyULID:
		kf = "ULID"
	default:
		kf = fmt.Sprintf("the pattern %q", kf)
	}
	if r.KeyAt != "" {
		out = append(out, fmt.Sprintf("keys: %s in the body at %q", kf, r.KeyAt))
	} else {
		out = append(out, "keys: "+kf+" in "+r.KeyHeader)
	}
	if r.KeyOptional {
		out = append(out, "key optional: a request without one is served as a plain request (widens: no 400 asked for it)")
	} else {
		out = append(out, "key required: a request without one must get 400")
	}
	if maxKey > 0 {
		out = append(out, fmt.Sprintf("max key length: %d bytes (a longer key must get 400)", maxKey))
	} else {
		out = append(out, "max key length: none declared (widens: no over-long key sent)")
	}
	if ttl > 0 {
		out = append(out, fmt.Sprintf("in-flight TTL: %v (widens: a key may stay in flight that long after its owner died or gave up; the final probes run up to %v)", ttl, settle))
	} else {
		out = append(out, fmt.Sprintf("in-flight TTL: not declared (the final probes run up to --settle %v: a key still held then fails liveness, or, where its owner may have left its claim behind (killed, or answered 5xx, 202 or 408, or not at all), is not judged)", settle))
	}
	if p.SavesErrors {
		out = append(out, "saves errors: every 5xx is saved and replayed for its key (widens: a key that replays one 5xx is settled)")
	}
	if p.ReplayAny2xx {
		out = append(out, "replays: a success's body under perhaps another 2xx (widens: a replay answered 200 after a first 201 is faithful)")
	}
	return out
}

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "{}"
	}
	return s
}
