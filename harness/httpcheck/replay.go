package httpcheck

import (
	"fmt"

	"github.com/idemcheck/idemcheck/harness/history"
)

// checkReplay judges that every answer after a key's first completed
// success ([completed]; JSON bodies compared as values, [sameReply]), for
// the same body, equals it: its status too, unless the service declared
// that its replays may carry another completed 2xx
// ([Policy.ReplayAny2xx]).
//
// A request sent before that first success came back is judged too when
// it got a completed success of its own: a key answered by two successes
// that differ told its callers two results for one operation, whatever
// the order they were sent in. That is how an owner that lost its claim
// (paused past its lease while another request took the key over and
// answered) shows when it answers its own result, saved over the new
// owner's (an unfenced save) or never saved: a correct service answers
// such an owner's caller with the saved answer or an error. Its other
// answers (a 409 decided when it came, a 5xx) are not replays and are
// left alone.
func checkReplay(xs []history.Exchange, p Policy) Result {
	type kb struct{ key, body string }
	firsts := map[kb]int{} // index in xs
	for i, x := range xs {
		if !x.HasKey || !completed(x.Status) {
			continue
		}
		k := kb{x.Key, x.Body}
		if f, ok := firsts[k]; !ok || x.Return < xs[f].Return {
			firsts[k] = i
		}
	}
	r := Result{Checker: Replay, Applied: len(firsts) > 0}
	var vs []Violation
	judged, again, overlapping := 0, 0, 0
	var others *otherKeys // built at the first violation
	bad := map[kb]bool{}
	for i, x := range xs {
		k := kb{x.Key, x.Body}
		fi, ok := firsts[k]
		if !ok || i == fi || !x.Answered() || bad[k] {
			continue
		}
		f := xs[fi]
		before := x.Call <= f.Return // sent before the first success came
		if before && !completed(x.Status) {
			continue
		}
		if history.TryAgain(x.Status) {
			again++
			continue
		}
		judged++
		if before {
			overlapping++
		}
		otherStatus := x.Status != f.Status && !(p.ReplayAny2xx && completed(x.Status))
		if otherStatus || !sameReply(x.Reply, f.Reply) {
			bad[k] = true
			where := ""
			if others == nil {
				others = &otherKeys{}
				for _, fi := range firsts {
					others.firsts = append(others.firsts, xs[fi])
				}
			}
			if o := others.of(x.Reply, x.Key); o != "" {
				where = fmt.Sprintf("; it is the answer key %s got first: another key's answer, replayed for this one", o)
			} else if d := replyDiff(x.Reply, f.Reply); d != "" {
				where = "; " + d
			} else if otherStatus && completed(x.Status) {
				// The same body under another 2xx: the two bodies,
				// clipped alike, hid what differed.
				where = fmt.Sprintf("; the bodies are the same, the status is not: %d, the first answer's %d (a service that replays a success with another 2xx declares it: --replay-any-2xx)", x.Status, f.Status)
			} else if otherStatus {
				where = fmt.Sprintf("; the status differs: %d, the first answer's %d", x.Status, f.Status)
			}
			if before {
				where += fmt.Sprintf("; two successes that differ for one key: this request was sent at %s, before the first success came, and still ran when it came (an owner that lost its claim answered its own result: its save not fenced by its claim, or its answer not the saved one)", ms(x.Call))
			}
			vs = append(vs, Violation{Checker: Replay, Key: x.Key, At: x.Return, Detail: fmt.Sprintf(
				"key %s: client %d got %d %q from %s at %s after client %d got %d %q from %s at %s%s",
				x.Key, x.Client, x.Status, clip(x.Reply), x.Instance, ms(x.Return), f.Client, f.Status, clip(f.Reply), f.Instance, ms(f.Return), where)})
		}
	}
	r.Detail = fmt.Sprintf("%d answers after a key's first success, all equal to it", judged)
	if overlapping > 0 {
		r.Detail = fmt.Sprintf("%d answers after a key's first success, all equal to it (%d of them successes to requests sent before it came)", judged, overlapping)
	}
	if judged == 0 {
		r.Applied = false
		r.Detail = "no answer came after a key's first success"
	}
	if again > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("not judged as replays: %d answer(s) after a key's first success were %s", again, tryAgainCodes))
	}
	return finish(r, vs)
}
