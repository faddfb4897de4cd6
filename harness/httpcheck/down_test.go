package httpcheck

import (
	"strings"
	"testing"
)

// TestDownIsNoted: an instance down when the final probes came is said
// under liveness, which the other results are not touched by.
func TestDownIsNoted(t *testing.T) {
	in := []Result{{Checker: Liveness, Pass: true}, {Checker: Replay, Pass: true}}
	out := Down(in, []string{"instance i2, killed at 8304.4ms, did not come back: nothing listens"}, nil)
	if len(out[0].Notes) != 1 || !strings.Contains(out[0].Notes[0], "1 instances were not running when the final probes came (instance i2, killed") ||
		!strings.Contains(out[0].Notes[0], "was not judged") || len(out[1].Notes) != 0 || len(in[0].Notes) != 0 {
		t.Fatalf("results %+v (from %+v)", out, in)
	}
	if out := Down(in, nil, nil); len(out[0].Notes) != 0 {
		t.Errorf("nothing down: %+v", out)
	}
}
