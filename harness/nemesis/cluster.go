package nemesis

import "github.com/idemcheck/idemcheck/harness/history"

// Window is a fault of a replicated topology being recorded: it starts
// when made (OpenWindow) and is added to the history, with its time
// window, by End. The faults of a Cluster overlap (a standby lags, then
// the primary dies, then the failover ends), so each is opened and ended
// on its own.
type Window struct {
	h     *history.History
	f     history.Fault
	ended bool
}

// OpenWindow starts recording a fault of kind (what says where, for the
// timeline: "standby", "primary", "network").
func OpenWindow(h *history.History, kind history.FaultKind, what string) *Window {
	return &Window{h: h, f: history.Fault{Client: -1, Kind: kind, Failpoint: what, Start: h.Now()}}
}

// End records the fault, ending now; a second End does nothing, and End
// on nil does nothing (a window that was never opened).
func (w *Window) End() {
	if w == nil || w.ended {
		return
	}
	w.ended = true
	w.f.End = w.h.Now()
	w.h.AddFault(w.f)
}
