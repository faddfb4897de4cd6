package idemtest

import (
	"testing"

	"github.com/idemcheck/idemcheck/internal/rapidrec"
)

// ExpectFailure runs the model property against a variant that is meant to
// be wrong (a mutant) and returns rapid's shrunk failure report. It fails t
// if the property holds: a model test that cannot catch the mutant has no
// teeth. Rapid saves the failing case under testdata/rapid/<test name>/, and
// replays it first on the next run, so the kill is a regression test.
//
// The factory's Open gets the variant as stores.Config.Variant, and must
// open that version of the store. The model test makes one call at a
// time: it catches what a call decides wrongly (an unfenced save, a
// missing fingerprint, a stale claim kept), not a race between calls
// (a SELECT then an INSERT). For a race, run [CheckScenario] with a
// factory whose Open opens the racy version, and expect its verdict to be
// a failure (check.Fail in the summary's scenario).
func ExpectFailure(t *testing.T, f Factory, variant string) string {
	t.Helper()
	failed, report := rapidrec.Check(t.Name(), ModelProperty(f, variant))
	if !failed {
		t.Fatalf("the model test passed on %s variant %q: it should have caught the bug (it makes one call at a time: a race between calls is caught by a scenario, CheckScenario with a factory opening the variant; and Open must open stores.Config.Variant)", f.Name, variant)
	}
	return report
}
