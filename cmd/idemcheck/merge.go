package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/hunt"
	"github.com/idemcheck/idemcheck/harness/mutate"
)

const mergeHelp = `Usage: idemcheck merge [--json] FILE|DIR...

Joins the --json reports of the shards of one sharded run of 'idemcheck
mutants', 'soak' or 'mutate' (each run with --shard i/n, perhaps on its own
machine) into the whole run's report and verdict, printed as that command
prints it. A directory stands for the *.json files in it (a CI job's
downloaded artifacts).

Every shard 1..n of one command with the same arguments must be there,
each once: a missing, repeated or foreign shard is an error.

Exit codes: those the unsharded run would give (0 pass, 1 violation or
survivor, 3 a shard was interrupted or undecided); 2 bad usage, or the
shards do not make one whole run.
`

// shardInfo is what a sharded command's --json report carries so that
// `idemcheck merge` can check that the shards make one whole run and
// decide its verdict as the unsharded run would.
type shardInfo struct {
	Command string `json:"command"`
	Index   int    `json:"index"`
	Of      int    `json:"of"`
	// Args is the command line without --shard and --json: the same in
	// every shard of one run.
	Args        []string `json:"args"`
	Interrupted bool     `json:"interrupted,omitempty"`
	// MinScore is mutate's --min-score, which its verdict needs.
	MinScore float64 `json:"min_score,omitempty"`
}

// shardFile is one shard's report, as read.
type shardFile struct {
	path string
	info shardInfo
	raw  []byte
}

func cmdMerge(_ context.Context, args []string, stdout, _ io.Writer) (int, error) {
	fs := newFlagSet("merge", mergeHelp)
	asJSON := fs.Bool("json", false, "print the merged report as one JSON object on stdout")
	paths, err := parseArgs(fs, mergeHelp, args, stdout, 100_000)
	if err != nil {
		return exitUsage, err
	}
	shards, err := readShards(paths)
	if err != nil {
		return exitUsage, err
	}
	interrupted := false
	for _, s := range shards {
		interrupted = interrupted || s.info.Interrupted
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	switch shards[0].info.Command {
	case "mutants":
		rep, err := mergeMutants(shards)
		if err != nil {
			return exitUsage, err
		}
		if *asJSON {
			err = enc.Encode(rep)
		} else {
			printMutants(stdout, rep)
		}
		if err != nil {
			return exitUsage, err
		}
		// The unsharded matrix's own code (mutantsCode): an undecided
		// run of the correct store is no failure of it, and what a
		// finished hunt proves stands through an interrupt.
		code := mutantsCode(rep)
		if interrupted && code == exitPass {
			code = exitUnknown
		}
		return code, nil
	case "mutate":
		rep, err := mergeMutate(shards)
		if err != nil {
			return exitUsage, err
		}
		rep.Interrupted = rep.Interrupted || interrupted
		minScore := shards[0].info.MinScore
		if *asJSON { // the unsharded run's --json, its verdict with it
			err = enc.Encode(mutateJSON{Report: rep, MinScore: minScore, Verdict: codeVerdict(mutateExit(rep, minScore))})
		} else {
			printMutate(stdout, rep, minScore)
		}
		if err != nil {
			return exitUsage, err
		}
		return mutateExit(rep, minScore), nil
	case "soak":
		rep, err := mergeSoak(shards)
		if err != nil {
			return exitUsage, err
		}
		rep.Interrupted = rep.Interrupted || interrupted
		slices.SortFunc(rep.Unfinished, func(a, b soakUnfinished) int { return cmp.Compare(a.Seed, b.Seed) })
		// The unsharded soak's own code (soakCode): a merge of runs
		// that judged nothing is no pass either; its verdict is the
		// code's, as summary.json's is.
		code, why := soakCode(rep)
		rep.Verdict = codeVerdict(code)
		if *asJSON {
			err = enc.Encode(rep)
		} else {
			printSoak(stdout, rep)
		}
		if err != nil {
			return exitUsage, err
		}
		if code == exitUsage {
			return exitUsage, fmt.Errorf("merge: %s", why)
		}
		return code, nil
	}
	return exitUsage, usagef("merge: %s: shards of %q, which has no merge (mutants, soak, mutate)", shards[0].path, shards[0].info.Command)
}

// readShards reads the reports (a directory: its *.json files), checks
// that they are the shards 1..n of one run, each once, and returns them in
// shard order.
func readShards(paths []string) ([]shardFile, error) {
	if len(paths) == 0 {
		return nil, usagef("merge: name the shards' --json reports (files or directories)")
	}
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, usagef("merge: %v", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		m, _ := filepath.Glob(filepath.Join(p, "*.json"))
		if len(m) == 0 {
			return nil, usagef("merge: %s has no *.json report", p)
		}
		files = append(files, m...)
	}
	var shards []shardFile
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, usagef("merge: %v", err)
		}
		var head struct {
			Shard *shardInfo `json:"shard"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, usagef("merge: %s: not a --json report: %v (a shard killed before it printed its report, at a job's time limit say, "+
				"is recovered from its journal by `idemcheck recheck --json <its run directory>`, whose report merges)", f, err)
		}
		if head.Shard == nil {
			return nil, usagef("merge: %s: not a shard's report (run with --shard i/n --json)", f)
		}
		shards = append(shards, shardFile{f, *head.Shard, raw})
	}
	first := shards[0].info
	byIndex := map[int]string{}
	for _, s := range shards {
		i := s.info
		if i.Command != first.Command || i.Of != first.Of || !slices.Equal(i.Args, first.Args) {
			return nil, usagef("merge: %s (%s %s, shard of %d) and %s (%s %s, shard of %d) are not shards of one run",
				shards[0].path, first.Command, strings.Join(first.Args, " "), first.Of, s.path, i.Command, strings.Join(i.Args, " "), i.Of)
		}
		if prev, dup := byIndex[i.Index]; dup {
			return nil, usagef("merge: shard %d/%d given twice: %s and %s", i.Index, i.Of, prev, s.path)
		}
		byIndex[i.Index] = s.path
	}
	var missing []string
	for i := 1; i <= first.Of; i++ {
		if _, ok := byIndex[i]; !ok {
			missing = append(missing, fmt.Sprintf("%d/%d", i, first.Of))
		}
	}
	if len(missing) > 0 {
		return nil, usagef("merge: shard(s) %s missing: the run is not whole", strings.Join(missing, ", "))
	}
	slices.SortFunc(shards, func(a, b shardFile) int { return a.info.Index - b.info.Index })
	return shards, nil
}

// decode reads each shard's report as a T.
func decode[T any](shards []shardFile) ([]*T, error) {
	out := make([]*T, len(shards))
	for i, s := range shards {
		out[i] = new(T)
		if err := json.Unmarshal(s.raw, out[i]); err != nil {
			return nil, usagef("merge: %s: %v", s.path, err)
		}
	}
	return out, nil
}

// interleave puts the shards' items back in the whole run's order: item p
// of the whole run was shard p mod n's item p div n. A shard cut short
// has fewer; the others' items after its last are kept, in their order
// (the merge stopped at the shortest shard's end, and an interrupted
// shard dropped what the whole ones had finished).
func interleave[T any](parts [][]T) []T {
	var out []T
	for k := 0; ; k++ {
		more := false
		for _, p := range parts {
			if k < len(p) {
				out = append(out, p[k])
				more = true
			}
		}
		if !more {
			return out
		}
	}
}

// mergeMutants joins the mutants matrices: the rows in the whole run's
// order, the correct store's runs of every shard, the longest shard's wall time.
func mergeMutants(shards []shardFile) (*hunt.MutantsReport, error) {
	reps, err := decode[hunt.MutantsReport](shards)
	if err != nil {
		return nil, err
	}
	out := *reps[0]
	out.Correct = hunt.CorrectReport{Verdict: check.Pass, Runs: []hunt.CorrectRun{}}
	out.Unfinished = nil // every shard's, not the first's alone
	var rows [][]hunt.MutantReport
	for _, r := range reps {
		rows = append(rows, r.Mutants)
		out.Unfinished = append(out.Unfinished, r.Unfinished...)
		out.Correct.Runs = append(out.Correct.Runs, r.Correct.Runs...)
		v := r.Correct.Verdict
		if v == "" {
			// Not run in this shard (cut short before it): not all of
			// the correct store was judged, whatever the others did;
			// "not run" is the whole merge's only if no shard ran it.
			v = check.Unknown
		}
		switch {
		case v == check.Fail:
			out.Correct.Verdict = check.Fail
		case v != check.Pass && out.Correct.Verdict == check.Pass:
			out.Correct.Verdict = v
		}
		out.Seconds = max(out.Seconds, r.Seconds)
	}
	if len(out.Correct.Runs) == 0 && out.Correct.Verdict == check.Unknown {
		out.Correct.Verdict = ""
	}
	out.Mutants = interleave(rows)
	return &out, nil
}

// mergeMutate joins the mutation runs: the results in the order generated,
// the counts and the score over all of them, each scenario's baseline run
// that failed (or the first shard's), the longest shard's wall time.
func mergeMutate(shards []shardFile) (*mutate.Report, error) {
	reps, err := decode[mutate.Report](shards)
	if err != nil {
		return nil, err
	}
	out := *reps[0]
	var parts [][]mutate.Result
	for _, r := range reps {
		parts = append(parts, r.Results)
		out.Seconds = max(out.Seconds, r.Seconds)
	}
	out.Baseline = slices.Clone(reps[0].Baseline)
	for _, r := range reps[1:] {
		for _, b := range r.Baseline {
			i := slices.IndexFunc(out.Baseline, func(x mutate.BaselineRun) bool { return x.Scenario == b.Scenario })
			switch {
			case i < 0:
				out.Baseline = append(out.Baseline, b)
			case baselineRank(b) > baselineRank(out.Baseline[i]):
				out.Baseline[i] = b
			}
		}
		out.Interrupted = out.Interrupted || r.Interrupted
	}
	out.Results = interleave(parts)
	if out.Results == nil {
		out.Results = []mutate.Result{}
	}
	out.Tally()
	return &out, nil
}

// baselineRank orders a scenario's baseline runs across shards: a
// failure outranks a run an interrupt cut short, which outranks a pass.
func baselineRank(b mutate.BaselineRun) int {
	switch {
	case !b.Passed && !b.Interrupted:
		return 2
	case b.Interrupted:
		return 1
	}
	return 0
}

// mergeSoak joins the soaks: each scenario's counts and seconds summed
// over the shards, in the plan's order, every run that did not pass and
// every seed that could not run, the longest shard's wall time.
func mergeSoak(shards []shardFile) (soakReport, error) {
	reps, err := decode[soakReport](shards)
	if err != nil {
		return soakReport{}, err
	}
	out := *reps[0]
	for _, r := range reps[1:] {
		if r.Commit != out.Commit {
			return soakReport{}, fmt.Errorf("the shards ran different builds (%q and %q): their counts are not one soak's", out.Commit, r.Commit)
		}
	}
	// Each shard's counts must say what its own verdict and its list of
	// runs that did not pass say: one bit flipped in a failing shard's
	// count made a merge PASS beside the shard's "fail".
	for i, r := range reps {
		code, why := soakCode(*r)
		if (r.Verdict != "" && r.Verdict != codeVerdict(code)) || (len(r.Bad) > 0 && code == exitPass) {
			return soakReport{}, fmt.Errorf("%s: its counts say %s, but its verdict is %q and it names %d run(s) that did not pass: the file was edited or damaged; run that shard again", shards[i].path, why, r.Verdict, len(r.Bad))
		}
	}
	out.Rows, out.Bad, out.Errors, out.Shard, out.Seconds = nil, []string{}, nil, nil, 0
	// A shard cut short (recovered from its journal, or interrupted)
	// brings its seeds that did not end and its count of those that ran:
	// the merge dropped them and printed PASS beside its exit 3.
	out.Ran, out.Unfinished, out.Interrupted, out.Recovered, out.Journals = 0, nil, false, false, nil
	rows := map[string]*soakRow{}
	for _, r := range reps {
		if r.Journal != "" {
			out.Journals = append(out.Journals, r.Journal)
		}
		out.Bad = append(out.Bad, r.Bad...)
		out.Errors = append(out.Errors, r.Errors...)
		out.Seconds = max(out.Seconds, r.Seconds)
		out.Ran += r.Ran
		out.Unfinished = append(out.Unfinished, r.Unfinished...)
		out.Interrupted = out.Interrupted || r.Interrupted
		out.Recovered = out.Recovered || r.Recovered
		for _, row := range r.Rows {
			t, ok := rows[row.Scenario]
			if !ok {
				t = &soakRow{Scenario: row.Scenario}
				rows[row.Scenario] = t
			}
			t.Pass += row.Pass
			t.Fail += row.Fail
			t.Unknown += row.Unknown
			t.Skipped += row.Skipped
			t.Seconds += row.Seconds
		}
	}
	// Every seed × scenario of the plan ran in exactly one shard: a soak
	// that ended whole counts each scenario once per seed (a shard whose
	// rows were cut out passed as a soak of the others).
	whole := !out.Interrupted && len(out.Unfinished) == 0 && len(out.Errors) == 0 && len(out.Draws) == 0
	for _, name := range out.Plan {
		r, ok := rows[name]
		if !ok {
			r = &soakRow{Scenario: name}
		}
		if n := r.Pass + r.Fail + r.Unknown + r.Skipped; whole && n != out.Seeds {
			return soakReport{}, fmt.Errorf("the shards count %s of scenario %s where the plan has %d seeds, and none was cut short: a shard is missing its rows, or was edited or damaged", plural(n, "run"), name, out.Seeds)
		}
		if ok {
			out.Rows = append(out.Rows, *r)
		}
	}
	return out, nil
}
