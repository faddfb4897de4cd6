// Package harness is the thin runner: it opens a fresh store for each
// scenario, runs the scenario's workload (harness/scenario) with its
// faults, probes every key once the clients are done, checks the history
// (harness/check) and sums the verdicts up into a [results.Summary]. The
// parts it joins live in one package per role, in the order the data
// flows:
//
//	workload → nemesis (faults) → history → check → results → report
//
// with scenario tying a workload to its faults, worker running clients in
// processes, hunt hunting mutants, and servers providing Postgres and
// Redis. Producers never import consumers, nor the reverse
// (layout_test.go keeps it so).
//
// One scenario run goes down one role at a time and comes back with a
// value, never climbing back into the runner:
//
//   - options.go: what a run is given ([Options]) and what it can do
//     ([Options.Caps]), its plan ([Options.Plan]) and forecast;
//   - run.go: [Run], the plan in phases, scenarios side by side;
//   - scenariorun.go: [RunScenario], one scenario on a fresh store, and
//     the store it opens ([Options.StoreConfig], [Options.NewEnv]);
//   - judge.go: [Options.Finish], the one tail every run ends with (the
//     final probe, the stall watch, the checkers by the store's
//     declarations), and [Judge], the one call of the checkers;
//   - recheck.go: [LoadRun] and [Recheck], a saved run judged again.
package harness
