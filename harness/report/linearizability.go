package report

import (
	"fmt"
	"io"

	"github.com/anishathalye/porcupine"

	"github.com/idemcheck/idemcheck/harness/check"
)

// WriteLinearization draws a scenario's linearizability check as a page
// (linearizability-<scenario>.html in a results directory): porcupine's
// visualisation of what the checker kept, a labelled row per key, or, for
// a passing history of more than [check.VisualizeCap] operations, a short
// page that says why there is no drawing. The checker keeps the data
// ([check.Linearization]) and the page is drawn here, so that package
// check writes no HTML.
func WriteLinearization(w io.Writer, l *check.Linearization) error {
	if l.TooLarge {
		_, err := fmt.Fprintf(w, `<!DOCTYPE html><html><head><meta charset="utf-8"><title>linearizability</title></head><body>
<p>The history has %d operations, more than the %d drawn in full, and every key's history is linearizable:
porcupine's visualisation is left out to keep checking linear (it would take longer than the check and
weigh about %d MB). A failing check draws its failing keys whatever their size. Run a shorter scenario
(fewer keys or seconds) to see the whole history drawn.</p></body></html>
`, l.Ops, check.VisualizeCap, l.Ops*300/1_000_000)
		return err
	}
	return porcupine.Visualize(l.Model, l.Info, w)
}
