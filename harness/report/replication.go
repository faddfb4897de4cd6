package report

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// clusterKinds are the faults of a replicated topology (the failover and
// partition scenarios), in the order the report lists them.
var clusterKinds = []history.FaultKind{history.FaultStandbyLag, history.FaultPrimaryPause,
	history.FaultPartitionClients, history.FaultPartitionStandby, history.FaultPartitionBoth, history.FaultFailover}

// ClusterFaults lists the faults of a replicated topology in h (standby
// lag, primary pause, partitions, failovers), by start time.
func ClusterFaults(h *history.History) []history.Fault {
	var out []history.Fault
	for _, f := range h.Faults() {
		if slices.Contains(clusterKinds, f.Kind) {
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// Lost is a claim or an answer that a store acknowledged before a
// failover and forgot in it.
type Lost struct {
	Key stores.KeyRef
	// What is "claim" (a Begin answered Claimed, its token neither saved
	// nor released before the failover) or "answer" (a Complete accepted).
	What string
	// Ack is the acknowledged call; Fresh the Begin, after the failover,
	// that claimed the key afresh (not a takeover: the store had no record
	// of it at all), inside the retention window.
	Ack, Fresh history.Op
	// Failover is the failover that lost it.
	Failover history.Fault
}

// LostInFailover finds, for each failover in h, the keys whose
// acknowledged claim or answer the failover forgot: the key had an
// acknowledged record before the failover began (a claim still held, or a
// saved answer), and a Begin that started after it began was answered
// with a fresh claim, no takeover, within retention of the
// acknowledgement. A store that kept the record would have answered 409,
// a replay, or a takeover of the stale claim. Keys are listed once, by the
// first failover that lost them.
func LostInFailover(h *history.History, retention time.Duration) []Lost {
	var fos []history.Fault
	for _, f := range h.Faults() {
		if f.Kind == history.FaultFailover {
			fos = append(fos, f)
		}
	}
	if len(fos) == 0 {
		return nil
	}
	var out []Lost
	_ = h.EachPart(func(p *history.History) error { // a spilled history part by part
		out = append(out, lostInPart(p, fos, retention)...)
		return nil
	})
	return out
}

// lostInPart is LostInFailover on one part of a history
// (history.History.EachPart), fos its failovers.
func lostInPart(h *history.History, fos []history.Fault, retention time.Duration) []Lost {
	byKey, order := history.ByKey(h.Ops())
	var out []Lost
	for _, k := range order {
		ops := byKey[k]
	failovers:
		for _, fo := range fos {
			// The last acknowledged record before the failover began.
			var ack *history.Op
			what := ""
			for i := range ops {
				op := ops[i]
				if op.Return == history.Never || op.Return >= fo.Start || op.Output.Unknown {
					continue
				}
				switch {
				case op.IsClaim():
					ack, what = &ops[i], "claim"
				case op.Accepted(models.Complete):
					ack, what = &ops[i], "answer"
				case op.Accepted(models.Release) && ack != nil && what == "claim" && op.Input.Token == ack.Output.Decision.Token:
					ack, what = nil, ""
				}
			}
			if ack == nil {
				continue
			}
			for _, op := range ops {
				if op.Call < fo.Start || !op.IsClaim() || op.Output.Decision.Takeover {
					continue
				}
				if time.Duration(op.Call-ack.Return) >= retention || released(ops, ack, op.Return) {
					break
				}
				out = append(out, Lost{Key: k, What: what, Ack: *ack, Fresh: op, Failover: fo})
				break failovers
			}
		}
	}
	return out
}

// released reports whether the claim acknowledged by ack may have been
// released (a Release of its token, answered or not) before before: a
// fresh claim after it is then no loss.
func released(ops []history.Op, ack *history.Op, before int64) bool {
	if !ack.IsClaim() {
		return false
	}
	for _, op := range ops {
		if op.Input.Kind == models.Release && op.Input.Token == ack.Output.Decision.Token && op.Call < before && !op.Output.Fenced && !op.Output.NotApplied {
			return true
		}
	}
	return false
}

// writeReplication writes, for a scenario with faults of a replicated
// topology, their windows and what the failovers lost.
func writeReplication(w io.Writer, name string, h *history.History, retention time.Duration) {
	fs := ClusterFaults(h)
	if len(fs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## Failover and partitions of %s\n\n", name)
	for _, f := range fs {
		fmt.Fprintf(w, "- %s (%s): %s to %s (%s)\n", f.Kind, f.Failpoint, history.Millis(f.Start), history.Millis(f.End),
			time.Duration(f.End-f.Start).Round(time.Millisecond))
	}
	lost := LostInFailover(h, retention)
	claims, answers := 0, 0
	for _, l := range lost {
		if l.What == "claim" {
			claims++
		} else {
			answers++
		}
	}
	fmt.Fprintf(w, "\nAcknowledged before a failover and lost by it: %d claim(s), %d answer(s).", claims, answers)
	if len(lost) == 0 {
		fmt.Fprintf(w, " Every key acknowledged before a failover kept its record.\n")
		return
	}
	fmt.Fprintf(w, " The store acknowledged them, the standby it failed over to never had them, and a retry then claimed the key afresh: the work runs again.\n\n")
	for i, l := range lost {
		if i == 20 {
			fmt.Fprintf(w, "- … %d more\n", len(lost)-20)
			break
		}
		ack := fmt.Sprintf("claimed by client %d (token %s), acknowledged at %s", l.Ack.Client, faults.ShortToken(string(l.Ack.Output.Decision.Token)), history.Millis(l.Ack.Return))
		if l.What == "answer" {
			ack = fmt.Sprintf("answer saved by client %d (token %s), acknowledged at %s", l.Ack.Client, faults.ShortToken(string(l.Ack.Input.Token)), history.Millis(l.Ack.Return))
		}
		fmt.Fprintf(w, "- `%s`: %s; the failover ran %s to %s; client %d claimed the key afresh at %s\n",
			l.Key, ack, history.Millis(l.Failover.Start), history.Millis(l.Failover.End), l.Fresh.Client, history.Millis(l.Fresh.Call))
	}
}
