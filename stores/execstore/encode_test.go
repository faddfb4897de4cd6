package execstore

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idemcheck/idemcheck/stores"
)

// TestAppendBegin: the hand-written begin decodes to what json.Marshal's
// does, for keys and fingerprints a careless encoder breaks.
func TestAppendBegin(t *testing.T) {
	texts := []string{"", "k", `"quoted" \back\slash`, "tab\tnl\ncr\r\x00nul\x1f", "café ☕ 🚀", "\xff\xfe invalid", "<&>\u2028"}
	now := ms(time.Now())
	for _, tenant := range texts {
		for _, key := range texts {
			for _, lease := range []float64{0, 1.5} {
				r := &wireRequest{Key: stores.KeyRef{Tenant: tenant, Key: key}, Fingerprint: key + tenant, NowMs: now, LeaseMs: lease}
				if !utf8.ValidString(r.Fingerprint) {
					r.Fingerprint = "fp"
				}
				want, err := json.Marshal(toStore{Type: "begin", ID: 42, Trace: lease > 0, Request: r})
				if err != nil {
					t.Fatal(err)
				}
				got := appendBegin(nil, 42, lease > 0, r)
				var a, b toStore
				if err := strict(got, &a); err != nil {
					t.Fatalf("%s: %v", got, err)
				}
				if err := strict(want, &b); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("appendBegin %s\n decodes unlike json.Marshal's %s", got, want)
				}
			}
		}
	}
}

// TestAppendDecision: the hand-written answer decodes to what
// json.Marshal's does.
func TestAppendDecision(t *testing.T) {
	at, fence := ms(time.Now()), uint64(7)
	for _, d := range []wireDecision{
		{Outcome: "claimed", Token: "9f2c", DecidedAtMs: &at},
		{Outcome: "claimed", Token: `a"b\c`, Takeover: true, Fence: &fence},
		{Outcome: "claimed", Token: "9f2c", Fence: &fence, DecidedAtMs: &at, LeaseUntilMs: &at},
		{Outcome: "in-flight"},
		{Outcome: "mismatch", DecidedAtMs: &at},
	} {
		id := int64(9)
		want, err := json.Marshal(fromStore{Type: "ok", ID: &id, Decision: &d})
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendDecision(nil, id, &d)
		if !ok {
			t.Fatalf("appendDecision refused %+v", d)
		}
		var a, b fromStore
		if err := strict(got, &a); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		if err := strict(want, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("appendDecision %s\n decodes unlike json.Marshal's %s", got, want)
		}
	}
	if _, ok := appendDecision(nil, 1, &wireDecision{Outcome: "replay", Response: &stores.Response{Status: 200}}); ok {
		t.Fatal("appendDecision wrote a replay")
	}
}
