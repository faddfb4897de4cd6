package check

// Worst returns the failed result that names the bug best: the first
// failed checker in [Preference] order (ok is false when none failed).
// Every report of a failure (a hunt's kill, a demo's caption, a run's
// summary line) ranks by it, so one bug is named alike everywhere.
func Worst(results []Result) (Result, bool) {
	for _, name := range Preference {
		for _, r := range results {
			if r.Checker == name && r.Verdict == Fail {
				return r, true
			}
		}
	}
	return Result{}, false
}

// Failed lists the failed checkers' results in [Preference] order.
func Failed(results []Result) []Result {
	var out []Result
	for _, name := range Preference {
		for _, r := range results {
			if r.Checker == name && r.Verdict == Fail {
				out = append(out, r)
			}
		}
	}
	return out
}

// Overall folds the checkers' verdicts into one, and gathers their
// violations: Fail if any failed, else Unknown if any could not decide,
// else Pass.
func Overall(results []Result) (Verdict, []Violation) {
	v, vs := Pass, []Violation{}
	for _, r := range results {
		vs = append(vs, r.Violations...)
		switch {
		case r.Verdict == Fail:
			v = Fail
		case r.Verdict == Unknown && v == Pass:
			v = Unknown
		}
	}
	return v, vs
}
