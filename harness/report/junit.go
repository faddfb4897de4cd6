package report

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/internal/wholefile"
)

// The JUnit XML schema's elements that CI systems read (GitHub Actions'
// test reporters, GitLab, Jenkins): a suite per run, a case per
// scenario × checker.
type (
	junitSuites struct {
		XMLName xml.Name     `xml:"testsuites"`
		Suites  []junitSuite `xml:"testsuite"`
	}
	junitSuite struct {
		Name     string      `xml:"name,attr"`
		Tests    int         `xml:"tests,attr"`
		Failures int         `xml:"failures,attr"`
		Skipped  int         `xml:"skipped,attr"`
		Time     string      `xml:"time,attr"`
		Cases    []junitCase `xml:"testcase"`
	}
	junitCase struct {
		Class   string        `xml:"classname,attr"`
		Name    string        `xml:"name,attr"`
		Time    string        `xml:"time,attr"`
		Failure *junitMessage `xml:"failure,omitempty"`
		Skipped *junitMessage `xml:"skipped,omitempty"`
		// Out holds the scenario's notes: what its verdict did not
		// judge, which a case that passed must not hide.
		Out string `xml:"system-out,omitempty"`
	}
	junitMessage struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	}
)

// WriteJUnit writes the run as JUnit XML to path: one testcase per
// scenario × checker (a failed checker is a failure with its violations,
// an undecided one a skip saying why), and one per skipped scenario and
// per scenario a cut-short run never ran. Each case of a scenario carries
// its notes (ScenarioResult.Notes) as its system-out, where CI shows them.
// The file is written whole or not at all, and a run that cannot write it
// leaves none (not an earlier run's).
func WriteJUnit(path string, sum *results.Summary) error {
	suite := junitSuite{Name: fmt.Sprintf("idemcheck %s/%s seed %d", sum.Store, sum.Variant, sum.Seed), Time: fmt.Sprintf("%.3f", sum.Seconds)}
	for _, s := range sum.Scenarios {
		class := fmt.Sprintf("idemcheck.%s.%s", sum.Store, s.ID())
		if s.Repetition > 0 {
			class += fmt.Sprintf("#%d", s.Repetition)
		}
		if s.Verdict == check.Skipped {
			suite.Cases = append(suite.Cases, junitCase{Class: class, Name: "scenario", Time: "0", Skipped: &junitMessage{Message: s.Skipped}})
			suite.Skipped++
			continue
		}
		per := fmt.Sprintf("%.3f", s.Seconds/float64(max(len(s.Checkers), 1)))
		var out string
		for _, n := range s.Notes {
			out += "note: " + n + "\n"
		}
		for _, c := range s.Checkers {
			tc := junitCase{Class: class, Name: c.Checker, Time: per, Out: out}
			switch c.Verdict {
			case check.Fail:
				var lines []string
				for _, v := range c.Violations {
					lines = append(lines, fmt.Sprintf("%s: %s", v.Key, v.Detail))
				}
				tc.Failure = &junitMessage{Message: c.Detail, Text: strings.Join(lines, "\n")}
				suite.Failures++
			case check.Unknown:
				tc.Skipped = &junitMessage{Message: "undecided: " + c.Detail}
				suite.Skipped++
			default:
				if c.Vacuous() {
					// Passed with nothing to judge: a skip saying why,
					// as the report's "—" (CI showed it a plain pass).
					tc.Skipped = &junitMessage{Message: "nothing to judge: " + c.Detail}
					suite.Skipped++
				}
			}
			suite.Cases = append(suite.Cases, tc)
		}
		if s.Error != "" {
			msg := "undecided: " + s.Error
			if sum.Stopped != "" {
				msg += " (" + sum.Stopped + ")"
			}
			suite.Cases = append(suite.Cases, junitCase{Class: class, Name: "workload", Time: "0", Skipped: &junitMessage{Message: msg}, Out: out})
			suite.Skipped++
		}
	}
	// The scenarios a run cut short never ran: each a skip saying why, so
	// that a CI dashboard does not show a smaller suite that passed.
	notRun := "not run: the run was interrupted first"
	if sum.Stopped != "" {
		notRun = "not run: " + sum.Stopped
	}
	for _, name := range sum.NotRun {
		suite.Cases = append(suite.Cases, junitCase{Class: fmt.Sprintf("idemcheck.%s.%s", sum.Store, name), Name: "scenario", Time: "0", Skipped: &junitMessage{Message: notRun}})
		suite.Skipped++
	}
	suite.Tests = len(suite.Cases)
	b, err := xml.MarshalIndent(junitSuites{Suites: []junitSuite{suite}}, "", "  ")
	if err != nil {
		return err
	}
	// Whole or not at all (a full disk cut one mid-tag); and not at all
	// means no file: a CI that found the last run's report there would
	// show its verdict for this run's.
	err = wholefile.Write(path, func(w io.Writer) error {
		_, err := w.Write(append([]byte(xml.Header), append(b, '\n')...))
		return err
	})
	if err != nil {
		if rerr := os.Remove(path); rerr == nil {
			return fmt.Errorf("%v (the file an earlier run left there is removed)", err)
		}
	}
	return err
}

// runDirName matches the names PrepareRunDir gives run directories.
var runDirName = regexp.MustCompile(`^\d{8}-\d{6}\.\d{3}-`)

// Marker is the file PrepareRunDir leaves in every run directory it
// makes: Prune removes only directories that have it, never one a person
// or another tool put there under a name that looks alike.
const Marker = ".idemcheck-run"

// Prune removes the oldest passing runs under root beyond the newest keep
// (by their names, which start with the time) and says how many it
// removed. It removes only what it can prove it may: a directory
// PrepareRunDir made (its name, and Marker inside) whose summary.json says
// the run passed. A failing, undecided or interrupted run is never
// removed (its recheck and replay lines must keep pointing at something),
// nor is a run whose summary cannot be read, nor the one latest points at
// (the run that prunes), nor one whose journal a live process still holds
// ([history.JournalHeld]: its report may still be being written). Two
// runs into one --out, the older ending last, had the newer removed: it
// pruned from latest, the run that ended last.
func Prune(root string, keep int) (int, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return 0, err
	}
	latest, _ := os.Readlink(filepath.Join(root, "latest"))
	var runs []string
	for _, e := range entries {
		if e.IsDir() && runDirName.MatchString(e.Name()) && !wholeJob(e.Name()) && passed(filepath.Join(root, e.Name())) {
			runs = append(runs, e.Name())
		}
	}
	sort.Strings(runs) // the names start with the time
	removed := 0
	for _, r := range runs[:max(len(runs)-max(keep, 0), 0)] {
		dir := filepath.Join(root, r)
		if held, _ := history.JournalHeld(filepath.Join(dir, history.JournalFile)); r == latest || held {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			return removed, err
		}
		removed++
	}
	return removed, nil
}

// wholeJob reports whether a run directory's name is that of a soak,
// mutants or mutate job (PrepareRunDir's variant is the command's name):
// the record of a whole job, which a check's --keep is not the one to
// remove (it removed a soak's, saying "old passing runs").
func wholeJob(name string) bool {
	for _, kind := range []string{"-soak", "-mutants", "-mutate"} {
		if strings.HasSuffix(name, kind) {
			return true
		}
	}
	return false
}

// passed reports whether dir is a run directory PrepareRunDir made whose
// summary says the run passed.
func passed(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, Marker)); err != nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		return false
	}
	var sum struct {
		Verdict     check.Verdict `json:"verdict"`
		Interrupted bool          `json:"interrupted"`
	}
	return json.Unmarshal(b, &sum) == nil && sum.Verdict == check.Pass && !sum.Interrupted
}
