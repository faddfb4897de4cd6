package httpcheck

import (
	"fmt"
	"slices"
	"strings"
)

// Down notes, under liveness, the instances that were not running when
// the final probes came (down: killed, their restart never answered;
// crashed: exited by themselves and not restarted), one line each: the
// probes sent to them went unanswered, so whether the keys come back
// with a restarted instance (its recovery) was not judged. A run whose
// killed instance never came back passed saying nothing of it. Other
// results are as they were.
func Down(results []Result, down, crashed []string) []Result {
	all := append(slices.Clone(down), crashed...)
	if len(all) == 0 {
		return results
	}
	out := slices.Clone(results)
	for i, r := range out {
		if r.Checker == Liveness {
			out[i].Notes = append(slices.Clone(r.Notes), fmt.Sprintf("%d instances were not running when the final probes came (%s): the probes sent to them went unanswered, and what a restarted instance answers for the keys it left (its recovery) was not judged",
				len(all), strings.Join(all, "; ")))
		}
	}
	return out
}
