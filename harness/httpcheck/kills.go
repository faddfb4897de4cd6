package httpcheck

import "github.com/idemcheck/idemcheck/harness/history"

// kills are the instance kills of a run ([history.FaultInstanceKill]),
// each with the last moment the provider may have counted a charge of
// the process it ended (by): pauseSlack after the signal (a charge on its
// way is counted just after it), never once the restarted instance was
// back: the fault's end, or the sending of the first request to it after
// the signal that got an HTTP answer (the proxy answers none itself). A
// charge the restarted instance made before the fault's end, then
// another, were excused as a crash.
type kills struct {
	fs []history.Fault
	by []int64
}

// killsOf finds the kills of fs and when each killed process was gone,
// as far as xs tell (none: by the faults alone), in one pass over xs: a
// pair of charges asks it of every kill, and a run with hundreds of
// pairs asked it of every exchange each time.
func killsOf(xs []history.Exchange, fs []history.Fault) kills {
	k := kills{}
	at := map[string][]int{} // instance: its kills, by index into k.fs
	for _, f := range fs {
		if f.Kind != history.FaultInstanceKill {
			continue
		}
		by := f.Start + pauseSlack
		if f.End >= f.Start {
			by = min(by, f.End)
		}
		at[f.Failpoint] = append(at[f.Failpoint], len(k.fs))
		k.fs, k.by = append(k.fs, f), append(k.by, by)
	}
	for _, x := range xs {
		if !x.Answered() {
			continue
		}
		for _, i := range at[x.Instance] {
			if x.Call > k.fs[i].Start {
				k.by[i] = min(k.by[i], x.Call)
			}
		}
	}
	return k
}

// across reports whether idemcheck killed the instance (any, when the
// provider could not tell which) between a charge it made at from and a
// charge at to: the signal came before to, and from before the killed
// process was gone. An exit by itself ([history.FaultInstanceExit]) is
// not a kill.
func (k kills) across(inst string, from, to int64) bool {
	for i, f := range k.fs {
		if (inst == "" || f.Failpoint == inst) && f.Start <= to && from <= k.by[i] {
			return true
		}
	}
	return false
}

// killedBetween is [kills.across] of fs's kills, knowing no exchanges.
func killedBetween(fs []history.Fault, inst string, from, to int64) bool {
	return killsOf(nil, fs).across(inst, from, to)
}
