package httpreport

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/httpcheck"
)

// fixture is a recorded run on two instances: order o1 charged twice at
// once (concurrent), orders o2 and o3 charged again after they were
// answered (after-done, twice), i2 killed and i1 crashed once.
func fixture() (Run, *history.History, *history.Ledger) {
	h := history.New()
	var cs []history.Charge
	charge := func(order, via string, at int64) {
		cs = append(cs, history.Charge{ID: fmt.Sprintf("ch_%d", len(cs)+1), Order: order, Via: via, At: at, End: at + 5,
			Outcome: history.OutcomeCharged, Effective: true, Client: -1})
	}
	x := func(client int, inst, purpose, key, order string, call, ret int64, status int, reply string) {
		h.AddExchange(history.Exchange{Client: client, Instance: inst, Purpose: purpose, Key: key, HasKey: true, Order: order,
			Body: "b-" + order, Attempt: 1, Call: call, Return: ret, Status: status, Reply: reply})
	}
	x(0, "i1", history.PurposeFirst, "k1", "o1", 10, 60, 200, `{"charge":"ch_1"}`)
	x(1, "i2", history.PurposeRace, "k1", "o1", 11, 61, 200, `{"charge":"ch_2"}`)
	charge("o1", "i1", 20)
	charge("o1", "i2", 21)
	for i, o := range []string{"o2", "o3"} {
		t := int64(100 + 100*i)
		k := "k" + o[1:]
		x(0, "i1", history.PurposeFirst, k, o, t, t+30, 200, `{"charge":"x"}`)
		charge(o, "i1", t+10)
		x(0, "i2", history.PurposeReplay, k, o, t+40, t+70, 200, `{"charge":"y"}`)
		charge(o, "i2", t+50)
	}
	h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstanceKill, Failpoint: "i2", Start: 400, End: 450})
	h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstanceExit, Failpoint: "i1", Start: 500, End: 560})
	run := Run{Targets: []string{"http://127.0.0.1:1/orders", "http://127.0.0.1:2/orders"}, Seed: 1, Duration: "1s", Clients: 2,
		Declared: []string{"keys: UUID v4 in Idempotency-Key"},
		Crashes:  []history.Crash{{Instance: "i1", At: 500, Status: "exit status 1", LogTail: "TypeError: boom\n    at charge", Restarted: 560}}}
	return run, h, history.LedgerOf(cs)
}

// TestReportCountsAndTimelines: the text report counts violations per
// cause and shows one timeline per cause, the crash with its log, and the
// declarations; a run that tested nothing says so on its first line.
func TestReportCountsAndTimelines(t *testing.T) {
	run, h, l := fixture()
	results := httpcheck.Run(httpcheck.Evidence{Hist: h, Ledger: l})
	var b bytes.Buffer
	if err := Write(&b, run, h, l, results); err != nil {
		t.Fatal(err)
	}
	rep := b.String()
	for _, want := range []string{
		"causes: after-done 2, concurrent 1",
		"at-most-once violation [concurrent] (the first of 1)",
		"at-most-once violation [after-done] (the first of 2)",
		"CRASH: instance i1 exited by itself at",
		"| TypeError: boom",
		"declared keys: UUID v4",
	} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	if n := strings.Count(rep, "at-most-once violation ["); n != 2 {
		t.Errorf("%d at-most-once timelines, want one per cause (2):\n%s", n, rep)
	}

	dead := history.New()
	for i := 0; i < 10; i++ {
		dead.AddExchange(history.Exchange{Instance: "i1", Purpose: history.PurposeFirst, Key: fmt.Sprint("k", i), HasKey: true,
			Order: fmt.Sprint("o", i), Call: int64(i), Return: int64(i + 1), Status: 500})
	}
	b.Reset()
	nl := history.NewLedger()
	if err := Write(&b, run, dead, nl, httpcheck.Run(httpcheck.Evidence{Hist: dead, Ledger: nl})); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "NOTHING TESTED: the service answered 500 to 100% of keyed requests") {
		t.Errorf("a dead service's report does not say so first:\n%s", b.String())
	}
}

// TestWriteDir: the directory holds the text report, the page, the
// history and the summary, and the history loads back.
func TestWriteDir(t *testing.T) {
	run, h, l := fixture()
	dir := t.TempDir()
	if err := WriteDir(dir, run, h, l, httpcheck.Run(httpcheck.Evidence{Hist: h, Ledger: l})); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.txt", HTMLFile, "history.jsonl", "summary.json"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	f, err := os.Open(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved, err := history.Load(f)
	if err != nil || len(saved) != 1 || len(saved[0].Hist.Exchanges()) != len(h.Exchanges()) || len(saved[0].Ledger.Charges()) != len(l.Charges()) {
		t.Fatalf("history did not load back: %v %+v", err, saved)
	}
}

// TestUndecided: no violation with something unjudged is UNDECIDED, in
// the verdict words, the text report and summary.json (pass false); a
// violation anywhere is FAIL whatever else was unjudged.
func TestUndecided(t *testing.T) {
	pass := httpcheck.Result{Checker: httpcheck.AtMostOnce, Applied: true, Pass: true, Detail: "fine"}
	open := httpcheck.Result{Checker: httpcheck.Liveness, Applied: true, Pass: true, Detail: "2 of 3 keys", Unjudged: "1 keys (first k) still in flight"}
	fail := httpcheck.Result{Checker: httpcheck.Status, Applied: true, Pass: false, Detail: "1 violation(s)"}
	for _, tc := range []struct {
		rs   []httpcheck.Result
		want string
	}{
		{[]httpcheck.Result{pass}, "PASS"},
		{[]httpcheck.Result{pass, open}, "UNDECIDED"},
		{[]httpcheck.Result{fail, open}, "FAIL"},
	} {
		if got := Overall(tc.rs); got != tc.want {
			t.Errorf("Overall = %s, want %s", got, tc.want)
		}
	}
	run, h, l := fixture()
	dir := t.TempDir()
	if err := WriteDir(dir, run, h, l, []httpcheck.Result{pass, open}); err != nil {
		t.Fatal(err)
	}
	txt, _ := os.ReadFile(filepath.Join(dir, "report.txt"))
	if !strings.Contains(string(txt), "UNDECIDED liveness") || !strings.Contains(string(txt), "not judged: 1 keys (first k)") {
		t.Errorf("report.txt:\n%s", txt)
	}
	sum, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	if !strings.Contains(string(sum), `"pass": false`) || !strings.Contains(string(sum), `"undecided": true`) {
		t.Errorf("summary.json:\n%s", sum)
	}
}

// TestClosing: the last line says which checkers failed, that the run is
// undecided, or that every checker passed, naming those with nothing to
// judge and those whose pass carries notes.
func TestClosing(t *testing.T) {
	pass := httpcheck.Result{Checker: httpcheck.AtMostOnce, Applied: true, Pass: true}
	idle := httpcheck.Result{Checker: httpcheck.Replay, Pass: true, Detail: "no answer came after a key's first success"}
	fail := httpcheck.Result{Checker: httpcheck.Liveness, Applied: true, Violations: []httpcheck.Violation{{Checker: httpcheck.Liveness}}}
	open := httpcheck.Result{Checker: httpcheck.Liveness, Applied: true, Pass: true, Unjudged: "1 keys held"}
	noted := httpcheck.Result{Checker: httpcheck.Status, Applied: true, Pass: true, Notes: []string{"a fingerprint of the order alone not tested"}}
	for _, tc := range []struct {
		results []httpcheck.Result
		want    string
	}{
		{[]httpcheck.Result{pass}, "PASS: every checker passed, each on what it judged"},
		{[]httpcheck.Result{pass, idle}, "PASS: every checker passed; replay-fidelity had nothing to judge in this run (the lines above say why)"},
		{[]httpcheck.Result{pass, noted}, "PASS: every checker passed, each on what it judged (read the notes of status-codes above)"},
		{[]httpcheck.Result{pass, idle, fail}, "FAIL: liveness (1 violations)"},
		{[]httpcheck.Result{pass, idle, open}, `UNDECIDED: no violation, but not everything was judged (the "not judged" lines above)`},
	} {
		if got := Closing(tc.results); got != tc.want {
			t.Errorf("Closing = %q, want %q", got, tc.want)
		}
	}
}

// TestFaultsSayWhatNoKillLeftOut: a run whose faults killed or paused no
// instance says that no key was taken over after its owner died, and,
// for instances someone else started (--target), that --cmd would; a
// run with a kill says nothing more.
func TestFaultsSayWhatNoKillLeftOut(t *testing.T) {
	net := []history.Fault{{Kind: history.FaultNetReset}, {Kind: history.FaultNetReset}}
	if got := faultCounts(net, true); !strings.Contains(got, "--target instances are someone else's") || !strings.Contains(got, "--cmd") {
		t.Errorf("--target, network faults only: %q", got)
	}
	if got := faultCounts(net, false); !strings.Contains(got, "no key was taken over after its owner died") {
		t.Errorf("--cmd, network faults only: %q", got)
	}
	if got := faultCounts(append(net, history.Fault{Kind: history.FaultInstanceKill}), false); strings.Contains(got, "(") {
		t.Errorf("a run with a kill: %q", got)
	}
}

// TestWriteDirNamesEveryFileNotWritten: a file that cannot be written
// (a full disk) stops the writing, and the error names the files after
// it too, which are not written either: only the first was named, and
// report.html, history.jsonl and summary.json were missing unsaid.
func TestWriteDirNamesEveryFileNotWritten(t *testing.T) {
	run, h, l := fixture()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "report.txt"), 0o755); err != nil { // no file can take its place
		t.Fatal(err)
	}
	err := WriteDir(dir, run, h, l, httpcheck.Run(httpcheck.Evidence{Hist: h, Ledger: l}))
	if err == nil || !strings.Contains(err.Error(), "not written either: "+HTMLFile+", history.jsonl, summary.json") {
		t.Fatalf("report.txt unwritable: %v", err)
	}
}

// TestNotesPastTheFirstSayWhere: a checker's notes past the few the text
// report prints say where the rest are, and summary.json holds them all
// (a run's excused double charges were hard to find past "… and 6 more").
func TestNotesPastTheFirstSayWhere(t *testing.T) {
	r := httpcheck.Result{Checker: httpcheck.AtMostOnce, Applied: true, Pass: true, Detail: "fine"}
	for i := range maxNotes + 2 {
		r.Notes = append(r.Notes, fmt.Sprintf("excused %d", i))
	}
	run, h, l := fixture()
	dir := t.TempDir()
	if err := WriteDir(dir, run, h, l, []httpcheck.Result{r}); err != nil {
		t.Fatal(err)
	}
	txt, _ := os.ReadFile(filepath.Join(dir, "report.txt"))
	if !strings.Contains(string(txt), "… and 2 more (every note is in summary.json") {
		t.Errorf("report.txt:\n%s", txt)
	}
	sum, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	if !strings.Contains(string(sum), fmt.Sprintf("excused %d", maxNotes+1)) {
		t.Errorf("summary.json lacks the last note:\n%s", sum)
	}
}
