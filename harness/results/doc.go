// Package results holds what a run of idemcheck produced, as values that
// every consumer reads alike: [Summary] (a whole run, summary.json),
// [ScenarioResult] (one scenario run), and [ID], the identity that names
// each scenario run's files in a results directory. The runner (package
// harness) fills them in; report, htmlreport, recheck and replay read
// them. It is a leaf of the harness: it imports only the data it carries
// (history, check's verdicts, scenario's episode records), never the
// runner nor a report.
package results
