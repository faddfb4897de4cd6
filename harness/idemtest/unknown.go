package idemtest

import (
	"fmt"
	"sync"

	"pgregory.net/rapid"

	"github.com/idemcheck/idemcheck/stores"
)

// unknownCases counts the model test's cases cut short by a call that
// failed with an error deciding nothing (a dropped connection), of all
// its cases, and keeps the first such error.
type unknownCases struct {
	mu               sync.Mutex
	cases, cut       int
	first, firstCall string
	// The calls with an invalid key, by kind (invalidBegin,
	// invalidWrite), those refused as the contract says
	// (stores.ErrInvalidKey, or ErrFenced for a write), and the first
	// answered otherwise.
	invalidCalls, invalidRefused [2]int
	invalidFirst                 [2]string
	// The calls answered, and those the store declared not applied
	// (stores.ErrNotApplied), over all the cases.
	applied, notApplied int
	// openErr is the first error of Factory.Open: the cases after it
	// are skipped, and the model test fails saying it.
	openErr error
	// budget counts the cases against ModelTimeBudget.
	budget caseBudget
}

// openFailed notes that Factory.Open failed.
func (u *unknownCases) openFailed(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.openErr == nil {
		u.openErr = err
	}
}

// unopened reports whether Factory.Open has failed: the cases left are
// skipped at once (a store whose server is down would time out in each).
func (u *unknownCases) unopened() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.openErr != nil
}

// openFailure says that the store could not be opened, and so the model
// test judged nothing after it; "" when every open worked.
func (u *unknownCases) openFailure() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.openErr == nil {
		return ""
	}
	return fmt.Sprintf("the store could not be opened (Factory.Open: %v): the model test judged nothing after it", u.openErr)
}

// appliedNothing says, when the store declared every call of every case
// not applied, that nothing was judged: a failure, as a store that
// refuses every call is no store. It is counted over the whole test, not
// per case: a short case whose one or two calls a correct store refused
// (a serialization failure) failed the model test.
func (u *unknownCases) appliedNothing() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.notApplied == 0 || u.applied > 0 {
		return ""
	}
	return fmt.Sprintf("the store answered every call not applied (%d calls in %d cases): nothing was judged", u.notApplied, u.cases)
}

// The kinds of call with an invalid key, each held to the contract apart.
const (
	invalidBegin = iota // refused with stores.ErrInvalidKey
	invalidWrite        // a save or release: ErrInvalidKey or ErrFenced
)

// invalidNeverRefused reports, when the cases made calls with an
// invalid key and the store refused none of them as the contract says
// (each failed with another error, or was declared not applied) while
// it answered other calls (some case ran to its end), what to say: an
// error now and then is a lossy link's, never one is the store's
// answer. A store that errs on every call is not judged (tooMany).
func (u *unknownCases) invalidNeverRefused() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cut >= u.cases {
		return ""
	}
	calls := [2]string{"Begins", "saves and releases"}
	want := [2]string{"stores.ErrInvalidKey", "stores.ErrInvalidKey or stores.ErrFenced"}
	for kind := range calls {
		if u.invalidCalls[kind] > 0 && u.invalidRefused[kind] == 0 {
			return fmt.Sprintf("the store refused none of %d %s with an invalid key (empty, or longer than %d bytes) as the contract says, with %s; first: %s",
				u.invalidCalls[kind], calls[kind], stores.MaxKeyLen, want[kind], u.invalidFirst[kind])
		}
	}
	return ""
}

// tooMany reports, when more than a tenth of the cases were cut short,
// what to say: the model test then judged too little of the store.
func (u *unknownCases) tooMany() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cut == 0 || u.cut*10 <= u.cases {
		return ""
	}
	return fmt.Sprintf("not judged: the store failed a call with an error that decides nothing in %d of %d cases (first: %s: %s); the model test follows decided answers only, and judged too little (the scenarios allow for such errors, a call of unknown outcome)",
		u.cut, u.cases, u.firstCall, u.first)
}

// unknown ends the case at a call that failed with an error deciding
// nothing (not ErrNotApplied, not ErrFenced: a dropped connection, a
// timeout): the call may or may not have taken effect, so the model
// cannot follow the store past it, and the case's later actions do
// nothing (the contract lets any call fail so: the scenarios allow for
// it). ModelTest skips, saying so, when too many cases ended so
// (unknownCases.tooMany): it judged too little to pass.
func (d *driver) unknown(rt *rapid.T, call string, err error) {
	d.cut = true
	if u := d.errored; u != nil {
		u.mu.Lock()
		u.cut++
		if u.first == "" {
			u.first, u.firstCall = err.Error(), call
		}
		u.mu.Unlock()
	}
	rt.Logf("%s: %v: its outcome is unknown, and the model cannot follow the store past it: the rest of this case is not judged", call, err)
}
