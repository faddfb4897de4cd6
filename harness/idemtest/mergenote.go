package idemtest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// mergeNote says, of a Begin on a key this test never claimed that the
// store answered as a key it has a record of (in flight, a mismatch, a
// replay), which keys the test did use that a careless store merges
// with it: the same key in another tenant, or one equal to it
// case-folded, trimmed or cut to 64 bytes. A store that lower-cased its
// keys failed with the one key's history alone, which never showed the
// other key whose record answered. "" otherwise.
func (d *driver) mergeNote(in models.Input, out models.Output) string {
	if in.Kind != models.Begin || !out.Decided() || out.Decision.Outcome == stores.Claimed || len(d.history[in.Key]) != 1 {
		return ""
	}
	norm := func(s string) string {
		s = strings.ToLower(strings.TrimSpace(s))
		if len(s) > 64 {
			s = s[:64]
		}
		return s
	}
	var alike []string
	for k := range d.history {
		if k != in.Key && (k.Key == in.Key.Key || k.Tenant == in.Key.Tenant && norm(k.Key) == norm(in.Key.Key)) {
			alike = append(alike, k.String())
		}
	}
	if len(alike) == 0 {
		return "\n  the test never used this key before, yet the store answered as if it held a record of it: is the key merged with another (case-folded, trimmed, cut short, its tenant left out)?"
	}
	slices.Sort(alike)
	return fmt.Sprintf("\n  the test never used this key before, yet the store answered as if it held a record of it: a careless store merges it with %s, which the test did use (case-folded, trimmed, cut to 64 bytes, or its tenant left out)", strings.Join(alike, ", "))
}
