package idemtest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// ExpectFailure runs the model property against a variant that is meant to
// be wrong (a mutant) and returns rapid's shrunk failure report. It fails t
// if the property holds: a model test that cannot catch the mutant has no
// teeth. Rapid saves the failing case under testdata/rapid/<test name>/, and
// replays it first on the next run, so the kill is a regression test.
func ExpectFailure(t *testing.T, f Factory, variant string) string {
	t.Helper()
	rec := &recordingTB{name: t.Name()}
	func() {
		defer func() {
			if r := recover(); r != nil && r != errFailNow {
				panic(r)
			}
		}()
		rapid.Check(rec, ModelProperty(f, variant))
	}()
	if !rec.Failed() {
		t.Fatalf("the model test passed on %s variant %q: it should have caught the bug", f.Name, variant)
	}
	return rec.output()
}

var errFailNow = fmt.Errorf("idemtest: FailNow")

// recordingTB is a rapid.TB that keeps what rapid reports instead of
// failing the enclosing test.
type recordingTB struct {
	name   string
	mu     sync.Mutex
	failed bool
	logs   []string
}

func (r *recordingTB) Helper()      {}
func (r *recordingTB) Name() string { return r.name }
func (r *recordingTB) log(s string) {
	r.mu.Lock()
	r.logs = append(r.logs, s)
	r.mu.Unlock()
}
func (r *recordingTB) Logf(format string, args ...any) { r.log(fmt.Sprintf(format, args...)) }
func (r *recordingTB) Log(args ...any)                 { r.log(fmt.Sprint(args...)) }
func (r *recordingTB) Skipf(format string, args ...any) {
	r.log("skip: " + fmt.Sprintf(format, args...))
	panic(errFailNow)
}
func (r *recordingTB) Skip(args ...any)                  { r.Skipf("%s", fmt.Sprint(args...)) }
func (r *recordingTB) SkipNow()                          { r.Skipf("skipped") }
func (r *recordingTB) Errorf(format string, args ...any) { r.Fail(); r.Logf(format, args...) }
func (r *recordingTB) Error(args ...any)                 { r.Fail(); r.Log(args...) }
func (r *recordingTB) Fatalf(format string, args ...any) { r.Errorf(format, args...); r.FailNow() }
func (r *recordingTB) Fatal(args ...any)                 { r.Error(args...); r.FailNow() }
func (r *recordingTB) FailNow()                          { r.Fail(); panic(errFailNow) }
func (r *recordingTB) Fail() {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
}
func (r *recordingTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}
func (r *recordingTB) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.logs, "\n")
}
