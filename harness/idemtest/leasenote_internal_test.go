package idemtest

import (
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// TestLeaseNote: a 409 on a claim whose lease ran out says the claim was
// held past the LockTTL, also where the model keeps "no row" beside the
// claim (a state the 409 cannot come from whatever the lease); it says
// nothing while the lease runs, for a claim whose call never answered,
// or where no state holds a claim. A rapid case with both states lost
// the note, and the undeclared-lease test failed on it now and then.
func TestLeaseNote(t *testing.T) {
	ttl := 10 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := stores.KeyRef{Tenant: "acme", Key: "k"}
	claim := models.State{Exists: true, Fingerprint: "fp", Token: "t", LockedAt: t0}
	uncertain := claim
	uncertain.LockUncertain = true
	done := models.State{Exists: true, Done: true, Fingerprint: "fp", LockedAt: t0}
	in := models.Input{Kind: models.Begin, Key: k, Fingerprint: "fp", Now: t0.Add(time.Minute)}
	out := models.Output{Decision: stores.Decision{Outcome: stores.InFlight}}
	for _, tc := range []struct {
		name   string
		states []models.State
		now    time.Time
		want   bool
	}{
		{"a claim past its lease", []models.State{claim}, in.Now, true},
		{"a claim past its lease, or no row", []models.State{claim, {}}, in.Now, true},
		{"a claim within its lease", []models.State{claim, {}}, t0.Add(ttl / 2), false},
		{"a claim whose call never answered", []models.State{uncertain}, in.Now, false},
		{"no claim at all", []models.State{{}, done}, in.Now, false},
	} {
		d := &driver{times: modelTimes{cfg: models.Config{LockTTL: ttl}}, possible: map[stores.KeyRef][]models.State{k: tc.states}}
		in := in
		in.Now = tc.now
		got := strings.Contains(d.leaseNote(in, out), "held past the LockTTL")
		if got != tc.want {
			t.Errorf("%s: note %v, want %v (%q)", tc.name, got, tc.want, d.leaseNote(in, out))
		}
	}
}

// TestDeclaredHintOnlyWhereItMends: a store that could not open because
// its server was unreachable gets no hint to declare its lease (a Redis
// that was down got one on every scenario); one that refused the suite's
// LockTTL does, unless the factory declared both.
func TestDeclaredHintOnlyWhereItMends(t *testing.T) {
	f := Factory{Name: "x"}
	for _, msg := range []string{
		"open x store: dial tcp 127.0.0.1:6399: connect: connection refused",
		`open x store: OperationalError: connection to server at "127.0.0.1", port 5432 failed: timeout expired`,
	} {
		if h := declaredHint(f, msg); h != "" {
			t.Errorf("%q got the hint %q", msg, h)
		}
	}
	refused := "open x store: a lease under 1s is not supported"
	if h := declaredHint(f, refused); !strings.Contains(h, "idemtest.Factory.LockTTL") {
		t.Errorf("%q got no hint to declare the lease: %q", refused, h)
	}
	f.LockTTL, f.Retention = 2*time.Second, time.Minute
	if h := declaredHint(f, refused); h != "" {
		t.Errorf("a factory that declared both got %q", h)
	}
}
