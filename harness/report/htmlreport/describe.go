package htmlreport

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// describeOp returns a store call's CSS class, its short label, its full
// description for hovering, and its key.
func describeOp(op history.Op) (class, label, title, key string) {
	in, out := op.Input, op.Output
	key = keyName(in.Key)
	var verb string
	switch {
	case in.Kind == models.Prune:
		class, verb = "prune", "Prune"
	case out.Unknown:
		class, verb = "unknown", in.Kind.String()+" ?"
	case in.Kind == models.Begin:
		switch out.Decision.Outcome {
		case stores.Claimed:
			class, verb = "claimed", "claimed"
			if out.Decision.Takeover {
				class, verb = "claimed takeover", "takeover"
			}
		case stores.Replay:
			class, verb = "replay", "replay"
		case stores.InFlight:
			class, verb = "inflight", "409 in flight"
		case stores.Mismatch:
			class, verb = "mismatch", "422 mismatch"
		default:
			class, verb = "unknown", out.Decision.Outcome.String()
		}
	case out.Fenced:
		class, verb = "fenced", map[models.Kind]string{models.Complete: "save", models.Release: "release"}[in.Kind]+" fenced"
	case in.Kind == models.Complete:
		class, verb = "completed", "saved"
	default:
		class, verb = "released", "released"
	}
	label = verb
	if in.Kind != models.Prune {
		label = shortKey(in.Key.Key) + " " + verb
	}
	var b strings.Builder
	fmt.Fprintf(&b, "client %d · %s · call #%d\n", op.Client, orAll(key), in.ID)
	fmt.Fprintf(&b, "%s\n\n", models.DescribeOperation(in, out))
	fmt.Fprintf(&b, "input:  %s", in.Kind)
	switch in.Kind {
	case models.Begin:
		fmt.Fprintf(&b, " fingerprint=%q now=%s", in.Fingerprint, clock(in.Now))
	case models.Complete:
		fmt.Fprintf(&b, " token=%s response=%d %q (store time ≤ %s)", in.Token, in.Response.Status, in.Response.Body, clock(in.Now))
	case models.Release:
		fmt.Fprintf(&b, " token=%s (store time ≤ %s)", in.Token, clock(in.Now))
	case models.Prune:
		fmt.Fprintf(&b, " now=%s", clock(in.Now))
	}
	b.WriteString("\noutput: ")
	switch {
	case out.Unknown:
		b.WriteString("unknown: no answer came back; the call may or may not have taken effect")
	case in.Kind == models.Begin:
		d := out.Decision
		fmt.Fprintf(&b, "%s", d.Outcome)
		if d.Outcome.HTTPStatus() != 0 {
			fmt.Fprintf(&b, " (HTTP %d)", d.Outcome.HTTPStatus())
		}
		if d.Token != "" {
			fmt.Fprintf(&b, " token=%s", d.Token)
		}
		if d.Takeover {
			b.WriteString(" takeover=true")
		}
		if d.Outcome == stores.Replay {
			fmt.Fprintf(&b, " response=%d %q", d.Response.Status, d.Response.Body)
		}
		if !d.DecidedAt.IsZero() {
			fmt.Fprintf(&b, " decided_at=%s", clock(d.DecidedAt))
		}
	case out.Fenced:
		b.WriteString("fenced (the token no longer holds the claim; HTTP 409)")
	default:
		b.WriteString("ok")
	}
	if op.Err != "" {
		fmt.Fprintf(&b, "\nerror:  %s", op.Err)
	}
	if op.Return == history.Never {
		fmt.Fprintf(&b, "\ncalled at %s, never returned", ms(op.Call))
	} else {
		fmt.Fprintf(&b, "\ncalled at %s, returned at %s (took %s)", ms(op.Call), ms(op.Return), dur(op.Return-op.Call))
	}
	return "b " + class, label, b.String(), key
}

func describeWork(w history.WorkRun) (class, label, title, key string) {
	key = keyName(w.Key)
	class, verb := "work", "work"
	end := "did not finish (its owner stopped inside it)"
	switch {
	case w.End == history.Never:
		class, verb = "work unfinished", "work ?"
	case w.Failed:
		class, verb = "work failed", "work failed"
		end = fmt.Sprintf("failed at %s (took %s)", ms(w.End), dur(w.End-w.Start))
	default:
		end = fmt.Sprintf("done at %s (took %s)", ms(w.End), dur(w.End-w.Start))
	}
	charge := "no charge recorded"
	if w.ChargeID != "" {
		charge = "charge " + w.ChargeID
		if !w.Failed {
			verb += " " + w.ChargeID
		}
	}
	title = fmt.Sprintf("client %d · %s · work for order %s\ntoken %s\nstarted at %s, %s\n%s",
		w.Client, key, w.Order, w.Token, ms(w.Start), end, charge)
	return "b " + class, shortKey(w.Key.Key) + " " + verb, title, key
}

func describeFault(f history.Fault) string {
	s := fmt.Sprintf("%s of client %d", f.Kind, f.Client)
	if f.Key != (stores.KeyRef{}) {
		s += " on " + keyName(f.Key)
	}
	if f.Failpoint != "" {
		s += " at " + f.Failpoint
	}
	if f.End > f.Start {
		return fmt.Sprintf("%s, %s to %s (%s)", s, ms(f.Start), ms(f.End), dur(f.End-f.Start))
	}
	return fmt.Sprintf("%s, at %s", s, ms(f.Start))
}

// keyName is the key as the checkers name it (tenant/key).
func keyName(k stores.KeyRef) string {
	if k == (stores.KeyRef{}) {
		return ""
	}
	return k.String()
}

func orAll(key string) string {
	if key == "" {
		return "every key"
	}
	return key
}

// shortKey shortens a key for a box label: the part after the last '-'
// when it is short ("order-o003" → "o003"), else the last 10 characters.
func shortKey(k string) string {
	if i := strings.LastIndexByte(k, '-'); i >= 0 && len(k)-i-1 > 0 && len(k)-i-1 <= 10 {
		return k[i+1:]
	}
	if r := []rune(k); len(r) > 10 {
		return "…" + string(r[len(r)-9:])
	}
	return k
}

// ms prints a history time (nanoseconds since the scenario began).
func ms(ns int64) string {
	if ns == history.Never {
		return "never"
	}
	return fmt.Sprintf("%.1fms", float64(ns)/1e6)
}

// dur prints a duration given in nanoseconds.
func dur(ns int64) string {
	switch d := time.Duration(ns); {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0fms", float64(ns)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.0fµs", float64(ns)/1e3)
}

func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format("15:04:05.000000")
}
