package stores

import (
	"errors"
	"fmt"
)

// ErrNotApplied is wrapped by the error of a call the store knows did not
// take effect: the server refused it as a whole and changed nothing (in
// Postgres, a transaction rolled back by a serialization failure, SQLSTATE
// 40001, or by a deadlock, 40P01). Unlike an error whose outcome is
// unknown (a timeout, a lost reply), it is a definite answer: the history
// records the call as a definite no-op, and the checkers judge it as one
// (it changes no state; it is neither a claim nor a save). A caller may
// retry it with the same key, as after a 409. A store must wrap it only
// where the call certainly did nothing: a call that did take effect and
// says otherwise is a lie the checkers can catch (the effect shows in the
// key's next answers), and fail.
var ErrNotApplied = errors.New("not applied: the store refused the call and changed nothing")

// NotApplied wraps err, the store's own error, as a definite no-op
// ([ErrNotApplied]), keeping its message.
func NotApplied(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrNotApplied, err)
}
