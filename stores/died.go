package stores

import "errors"

// ErrProcessDied is wrapped by the error of a call to a store that runs in
// a process of its own (stores/execstore) when that process died on its
// own before it answered: it exited or was killed, though no crash the
// harness injected killed it. The outcome is unknown, as after any error,
// and the store is started again for the next call; a run says how many
// calls such deaths cut, since a correct store's process should not die
// (it looks for this error's text among a history's errors, so that a
// saved run, whose errors are text, says it too).
var ErrProcessDied = errors.New("the store process died on its own before it answered")

// ErrUnanswered is wrapped by the error of a call to a store in a process
// of its own that the process held past a generous bound without an
// answer, while idemcheck held nothing of it (no failpoint of the call
// waited on the harness): a request the store lost (a worker thread that
// died on it, say). The call is cut, its outcome unknown, and the run says
// how many were, by this error's text, as it does of deaths; without it,
// a run waited on the request for as long as it was let.
var ErrUnanswered = errors.New("the store never answered the request")

// Restarter is a store that runs in a process of its own and starts it
// again when it dies (stores/execstore). Deaths says how many times its
// processes died on their own since it was opened (each such death's
// error wraps [ErrProcessDied]) and what the first one's error said. A
// run says it beside its verdict: the calls a death cut are judged as
// unknown outcomes and the store goes on, so a run passes through such
// deaths, and a death while no call was in flight leaves nothing else
// behind.
type Restarter interface {
	Deaths() (n int, first string)
}
