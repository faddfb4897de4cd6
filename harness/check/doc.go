// Package check judges a recorded history. Each checker proves or refutes,
// key by key, one promise of an idempotency-key store, and answers with a
// three-valued [Verdict] (pass, fail, or unknown when the evidence cannot
// decide) in a [Result] that lists each [Violation] found. [Run] runs them
// all on a scenario's [Evidence], in the order of [Docs]; [Preference]
// ranks them by how directly they name a bug. A run too large to hold in
// memory is given in parts ([Part]: the calls of some keys, with every
// Prune and fault) to [RunParts], which tallies each part and decides
// once on the merged tallies; [Run] is [RunParts] on one part. Checkers
// read the history and the ledger only; they never import what produced
// them. They write no HTML either: the linearizability checker keeps
// what a page of porcupine's visualisation needs ([Linearization]), and
// [github.com/idemcheck/idemcheck/harness/report.WriteLinearization] draws it.
//
// # Files
//
// One file per property, each holding its checker (a part's tally, how
// tallies merge, and the result decided from them) and the helpers only
// it uses (the layout of etcd's tests/robustness/validate):
//
//   - atmostonce.go: [AtMostOnce], each order charged at most once, and no
//     work run again after its key was saved done.
//   - exclusive.go: [Exclusive], a key's work never overlaps the work of a
//     healthy owner, and a server-clock store never takes a claim over
//     inside its lease.
//   - fencing.go: [Fencing], no write accepted from a superseded token, no
//     token repeated, and the store's fencing numbers ([stores.Fence] or
//     [stores.Decision.Fence]) increasing, within each life of a record
//     for a store that declares [stores.Semantics.FenceRestartsPerLife].
//   - replay.go: [Replay], every replay is a saved response and every
//     client got the same answer.
//   - mismatch.go: [Mismatch], other parameters never run and always get
//     422.
//   - linearizable.go: [Linearizable], each key's history is linearizable
//     against the decision-table model (porcupine), the whole history at
//     once or, past [VisualizeCap] operations, one key at a time; and what
//     it keeps for a page ([Linearization]).
//   - unknowns.go: the merge of unanswered Begins that nothing tells
//     apart, before porcupine searches.
//   - liveness.go: [Liveness], no key stays in flight once its owner is
//     gone and LockTTL has passed.
//   - retention.go: [Retention], no key outlives its retention once pruned.
//   - availability.go: [Availability], a Begin while its key is certainly
//     in flight is answered 409, not an error (a finding, never a
//     failure).
//   - explain.go: why a key's history is not linearizable, in words, and
//     the labels of its keys in porcupine's picture.
//   - check.go: the verdicts, results and checker names, [Preference],
//     [Docs], [Evidence], [Part], [Run] and [RunParts] (each part's
//     tally, merged, then decided), and the helpers several checkers
//     share.
//   - model.go: the model a store is judged by ([ModelFor]) and what a
//     saved run keeps to be checked again ([Params]).
package check
