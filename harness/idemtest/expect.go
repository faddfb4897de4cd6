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
func ExpectFailure(t *testing.T, f Factory, variant string) string {
	t.Helper()
	failed, report := rapidrec.Check(t.Name(), ModelProperty(f, variant))
	if !failed {
		t.Fatalf("the model test passed on %s variant %q: it should have caught the bug", f.Name, variant)
	}
	return report
}
