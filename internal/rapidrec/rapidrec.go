// Package rapidrec runs a rapid property that is expected to fail, for tests
// that prove a search has teeth: it keeps rapid's verdict and report
// instead of failing the enclosing test.
package rapidrec

import (
	"fmt"
	"strings"
	"sync"

	"pgregory.net/rapid"
)

// Check runs prop with rapid under a test named name (rapid keeps its
// failure files under testdata/rapid/<name>/) and reports whether rapid
// found a failing case, with everything rapid logged: the shrunk
// counterexample last.
func Check(name string, prop func(*rapid.T)) (failed bool, report string) {
	rec := &recordingTB{name: name}
	func() {
		defer func() {
			if r := recover(); r != nil && r != errFailNow {
				panic(r)
			}
		}()
		rapid.Check(rec, prop)
	}()
	return rec.Failed(), rec.output()
}

var errFailNow = fmt.Errorf("rapidrec: FailNow")

// recordingTB is a rapid.TB that keeps what rapid reports instead of
// failing a test; FailNow and the Skips unwind to Check.
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
