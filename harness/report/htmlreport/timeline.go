package htmlreport

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
)

// Layout of the timeline, in pixels. As in Jepsen's timeline.html, time
// runs down the page, each client has a column (a lane), and every event
// (a call, a return, a fault's start or end) takes the next row, so short
// calls stay readable next to long pauses; a quiet stretch longer than
// gapNS is drawn as a marked break.
const (
	rowH      = 15
	laneW     = 124
	boxW      = 116
	gutterL   = 70
	gutterR   = 240
	gapH      = 18
	tickEvery = 10
	gapNS     = int64(15 * time.Millisecond)
)

// timeline is one scenario's timeline, laid out.
type timeline struct {
	Width, Height int
	LaneW, BoxW   int
	GutterL       int
	BandX, BandW  int
	Lanes         []lane
	Boxes         []box
	Bands         []band
	FaultKinds    []faultKind // for the legend
	Ticks         []tick
	Gaps          []tick
	Ops           int // store calls drawn
	TotalOps      int // store calls recorded
	OmittedOps    int
	OmittedWork   int
	OmittedFaults int
}

type lane struct {
	X     int
	Label string
	Title string
}

// box is one operation (a store call, a work run) or a fault marker in a lane.
type box struct {
	X, Y, W, H int
	Class      string
	Label      string
	Title      string
	Key        string
}

// band is a fault window shaded across every lane.
type band struct {
	Y, H  int
	Kind  string
	Class string
	Label string
	Title string
}

type faultKind struct{ Kind, Class string }

type tick struct {
	Y     int
	Label string
}

type event struct {
	t     int64
	end   bool
	item  int // index into items
	order int
}

type itemKind int

const (
	itemOp itemKind = iota
	itemWork
	itemFault
)

type item struct {
	kind   itemKind
	client int
	start  int64
	end    int64 // history.Never when unknown / unfinished
	op     history.Op
	work   history.WorkRun
	fault  history.Fault
	y0, y1 int
	hasEnd bool
}

// buildTimeline lays out at most maxOps store calls of the history (the
// first ones by call time), with the work runs and faults that began
// before the first call left out. violated names the keys with a violation.
func buildTimeline(h *history.History, maxOps int, violated map[string]bool) timeline {
	ops := h.Ops()
	tl := timeline{TotalOps: len(ops)}
	cut := int64(history.Never)
	if maxOps >= 0 && len(ops) > maxOps {
		cut = ops[maxOps].Call
		tl.OmittedOps = len(ops) - maxOps
		ops = ops[:maxOps]
	}
	tl.Ops = len(ops)
	var items []item
	for _, op := range ops {
		items = append(items, item{kind: itemOp, client: op.Client, start: op.Call, end: op.Return, op: op})
	}
	for _, w := range h.Work() {
		if w.Start >= cut {
			tl.OmittedWork++
			continue
		}
		items = append(items, item{kind: itemWork, client: w.Client, start: w.Start, end: w.End, work: w})
	}
	for _, f := range h.Faults() {
		if f.Start >= cut {
			tl.OmittedFaults++
			continue
		}
		end := f.End
		if end < f.Start {
			end = f.Start // a fault that records no end is drawn as an instant
		}
		items = append(items, item{kind: itemFault, client: f.Client, start: f.Start, end: end, fault: f})
	}

	// Lanes: one per client that made a call or ran work, in id order.
	clientSet := map[int]bool{}
	for _, it := range items {
		if it.kind != itemFault {
			clientSet[it.client] = true
		}
	}
	var clients []int
	for c := range clientSet {
		clients = append(clients, c)
	}
	sort.Ints(clients)
	laneOf := map[int]int{}
	for i, c := range clients {
		laneOf[c] = i
		tl.Lanes = append(tl.Lanes, lane{X: gutterL + i*laneW, Label: fmt.Sprintf("client %d", c)})
	}
	labelLanes(tl.Lanes, clients, ops)
	tl.Width = gutterL + len(clients)*laneW + gutterR
	tl.LaneW, tl.BoxW, tl.GutterL = laneW, boxW, gutterL
	tl.BandX, tl.BandW = gutterL, len(clients)*laneW+gutterR-4

	// Events in time order; at equal times an end comes before a start so
	// that back-to-back boxes do not overlap.
	var evs []event
	for i, it := range items {
		evs = append(evs, event{t: it.start, item: i, order: len(evs)})
		if it.end != history.Never {
			evs = append(evs, event{t: it.end, end: true, item: i, order: len(evs)})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].t != evs[j].t {
			return evs[i].t < evs[j].t
		}
		return evs[i].end && !evs[j].end
	})
	y := 0
	for i, e := range evs {
		if i > 0 {
			if d := e.t - evs[i-1].t; d > gapNS {
				tl.Gaps = append(tl.Gaps, tick{Y: y, Label: "+" + dur(d)})
				y += gapH
			}
		}
		if i%tickEvery == 0 {
			tl.Ticks = append(tl.Ticks, tick{Y: y, Label: ms(e.t)})
		}
		it := &items[e.item]
		if e.end {
			it.y1, it.hasEnd = y, true
		} else {
			it.y0 = y
		}
		y += rowH
	}
	tl.Height = y + rowH

	// An unknown call or unfinished work is drawn down to the lane's next
	// box, or to the end: it may take effect at any moment after its call.
	starts := map[int][]int{}
	for _, it := range items {
		if it.kind != itemFault {
			starts[it.client] = append(starts[it.client], it.y0)
		}
	}
	for _, ys := range starts {
		sort.Ints(ys)
	}
	openEnd := func(it item) int {
		for _, s := range starts[it.client] {
			if s > it.y0 {
				return s
			}
		}
		return tl.Height
	}

	for i := range items {
		if items[i].kind == itemFault && !items[i].hasEnd {
			items[i].y1 = tl.Height // a fault still going on when the history ended
		}
	}
	for _, it := range items {
		switch it.kind {
		case itemOp, itemWork:
			x := gutterL + laneOf[it.client]*laneW + (laneW-boxW)/2
			y1 := it.y1
			if !it.hasEnd {
				y1 = openEnd(it)
			}
			b := box{X: x, Y: it.y0, W: boxW, H: max(y1-it.y0, rowH-2)}
			if it.kind == itemOp {
				b.Class, b.Label, b.Title, b.Key = describeOp(it.op)
			} else {
				b.Class, b.Label, b.Title, b.Key = describeWork(it.work)
			}
			if violated[b.Key] {
				b.Class += " v"
			}
			tl.Boxes = append(tl.Boxes, b)
		}
	}
	// A fault of a client is marked in its lane too: across the lane when
	// it falls between the client's boxes (a pause or crash between steps
	// of Run), as a strip at the lane's edge when it happens inside a call
	// (a pause inside Begin).
	for _, it := range items {
		l, ok := laneOf[it.client]
		if it.kind != itemFault || !ok {
			continue
		}
		f := it.fault
		x := gutterL + l*laneW + (laneW-boxW)/2
		y0, y1 := it.y0, max(it.y1, it.y0+rowH-2)
		inside := false
		for _, b := range tl.Boxes {
			if b.X == x && b.Y < y1 && y0 < b.Y+b.H {
				inside = true
				break
			}
		}
		m := box{X: x, Y: y0, W: boxW, H: y1 - y0, Class: "f " + faultClass(string(f.Kind)), Title: describeFault(f), Key: keyName(f.Key)}
		if inside {
			m.X, m.W = gutterL+l*laneW+laneW-7, 5
		} else {
			m.Class += " fl"
			m.Label = string(f.Kind) // the failpoint is in the title and the band's label
			if f.End > f.Start {
				m.Label += " " + dur(f.End-f.Start)
			}
		}
		tl.Boxes = append(tl.Boxes, m)
	}
	tl.Bands = faultBands(items)
	seen := map[string]bool{}
	for _, b := range tl.Bands {
		if !seen[b.Kind] {
			seen[b.Kind] = true
			tl.FaultKinds = append(tl.FaultKinds, faultKind{b.Kind, b.Class})
		}
	}
	return tl
}

// labelLanes names the lanes of helper clients: the pruner (only Prune
// calls) and the final liveness probe (the last client, which starts
// after every other client has called for the last time).
func labelLanes(lanes []lane, clients []int, ops []history.Op) {
	if len(clients) == 0 {
		return
	}
	onlyPrune := map[int]bool{}
	firstCall := map[int]int64{}
	for _, op := range ops {
		if _, ok := onlyPrune[op.Client]; !ok {
			onlyPrune[op.Client] = true
			firstCall[op.Client] = op.Call
		}
		if op.Input.Kind != models.Prune {
			onlyPrune[op.Client] = false
		}
	}
	for i, c := range clients {
		if onlyPrune[c] {
			lanes[i].Label += " pruner"
			lanes[i].Title = "runs Prune throughout the scenario"
		}
	}
	last := clients[len(clients)-1]
	first, ok := firstCall[last]
	if !ok || len(clients) < 2 {
		return
	}
	for _, op := range ops {
		if op.Client != last && op.Call >= first {
			return
		}
	}
	lanes[len(lanes)-1].Label += " probe"
	lanes[len(lanes)-1].Title = "the final probe: once every claim is past LockTTL, one Begin per key; a key still in flight is stuck (liveness)"
}

// faultBands merges overlapping windows of one kind into one band, so
// concurrent faults do not stack into a dark smear; each band's title
// lists the faults inside it.
func faultBands(items []item) []band {
	byKind := map[string][]item{}
	var kinds []string
	for _, it := range items {
		if it.kind != itemFault {
			continue
		}
		k := string(it.fault.Kind)
		if _, ok := byKind[k]; !ok {
			kinds = append(kinds, k)
		}
		byKind[k] = append(byKind[k], it)
	}
	sort.Strings(kinds)
	var out []band
	for _, k := range kinds {
		fs := byKind[k]
		sort.SliceStable(fs, func(i, j int) bool { return fs[i].y0 < fs[j].y0 })
		var cur []item
		y0, y1 := 0, 0
		flush := func() {
			if len(cur) == 0 {
				return
			}
			out = append(out, makeBand(k, cur, y0, max(y1, y0+rowH-2)))
			cur = nil
		}
		for _, f := range fs {
			if len(cur) > 0 && f.y0 <= y1 {
				cur = append(cur, f)
				y1 = max(y1, f.y1)
				continue
			}
			flush()
			cur, y0, y1 = []item{f}, f.y0, f.y1
		}
		flush()
	}
	return out
}

func makeBand(kind string, fs []item, y0, y1 int) band {
	b := band{Y: y0, H: y1 - y0, Kind: kind, Class: faultClass(kind)}
	var lines []string
	clients := map[int]bool{}
	points := map[string]bool{}
	start, end := fs[0].fault.Start, fs[0].fault.End
	for _, it := range fs {
		f := it.fault
		lines = append(lines, describeFault(f))
		clients[f.Client] = true
		points[f.Failpoint] = true
		start, end = min(start, f.Start), max(end, f.End)
	}
	what := kind
	if len(fs) > 1 {
		what = fmt.Sprintf("%d× %s", len(fs), kind)
	}
	where := ""
	if len(points) == 1 && fs[0].fault.Failpoint != "" {
		where = " at " + fs[0].fault.Failpoint
	}
	if end > start {
		b.Label = fmt.Sprintf("%s%s, %s", what, where, dur(end-start))
	} else {
		b.Label = what + where
	}
	if len(lines) > 20 {
		lines = append(lines[:20], fmt.Sprintf("… and %d more", len(lines)-20))
	}
	b.Title = strings.Join(lines, "\n")
	return b
}

// faultClass maps a fault kind to a CSS class: the known kinds have their
// own colour, any other kind gets one of a few spare colours, always the
// same one for the same name.
func faultClass(kind string) string {
	switch history.FaultKind(kind) {
	case history.FaultPause, history.FaultCrash:
		return "fk-" + kind
	}
	h := 0
	for _, r := range kind {
		h = h*31 + int(r)
	}
	if h < 0 {
		h = -h
	}
	return fmt.Sprintf("fk-other%d", h%4)
}
