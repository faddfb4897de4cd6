package stores

import "errors"

// ErrLost is wrapped by the error a fault injector in front of a store
// answers in the store's place when it loses the store's answer on the
// way back (scripts/lossy-exec.py, over the exec protocol's error code
// "lost"): the store may have acted, so the outcome is unknown, as after
// any error, but the error is the injected fault's, not one the store
// chose. A store never returns it itself. The history marks such a call
// (history.Op.Lost), and the availability checker counts it as the fault
// it is, not as an error where the store owed a 409: a correct store
// behind a lossy link passes --strict-availability.
var ErrLost = errors.New("lost: the answer was lost on the way back, after the store may have acted")
