package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/httpcheck"
	"github.com/idemcheck/idemcheck/harness/httpreport"
)

// httpSummary reads dir/summary.json as an `idemcheck http` run's, or
// returns nil when it is not one (a store run's summary has no targets).
func httpSummary(dir string) *httpreport.Summary {
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		return nil
	}
	var s httpreport.Summary
	if json.Unmarshal(b, &s) != nil || len(s.Run.Targets) == 0 {
		return nil
	}
	return &s
}

// recheckHTTP judges a saved black-box run again with this build's
// checkers, by the policy the run declared: it prints each checker's
// verdict then and now, and writes nothing.
func recheckHTTP(dir string, sum *httpreport.Summary, asJSON bool, stdout io.Writer) (int, error) {
	f, err := os.Open(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return exitUsage, fmt.Errorf("recheck: %v", err)
	}
	defer f.Close()
	saved, err := history.Load(f)
	if err != nil || len(saved) != 1 {
		return exitUsage, fmt.Errorf("recheck: %s/history.jsonl: want one black-box history (%v)", dir, err)
	}
	results := httpcheck.Run(httpcheck.Evidence{Hist: saved[0].Hist, Ledger: saved[0].Ledger, Policy: sum.Run.Policy})
	if sum.Run.Interrupted != "" {
		results = httpcheck.Interrupted(results, sum.Run.Interrupted)
	}
	code := exitPass
	switch {
	case !httpreport.Pass(results):
		code = exitFail
	case httpreport.Undecided(results):
		code = exitUnknown
	}
	if asJSON {
		return code, printJSON(stdout, map[string]any{"dir": dir, "pass": code == exitPass, "results": results})
	}
	then := map[string]httpcheck.Result{}
	for _, r := range sum.Results {
		then[r.Checker] = r
	}
	fmt.Fprintf(stdout, "recheck of the black-box run %s, with this build's checkers\n\n", dir)
	for _, r := range results {
		was, now := "-", httpreport.Word(r)
		if t, ok := then[r.Checker]; ok {
			was = httpreport.Word(t)
		}
		mark := ""
		if was != now {
			mark = "   (changed)"
		}
		fmt.Fprintf(stdout, "  %-16s then %-5s now %-5s%s\n", r.Checker, was, now, mark)
	}
	fmt.Fprintln(stdout)
	return code, httpreport.Write(stdout, sum.Run, saved[0].Hist, saved[0].Ledger, results)
}
