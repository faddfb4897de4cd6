package models

import (
	"github.com/anishathalye/porcupine"

	"github.com/idemcheck/idemcheck/stores"
)

// Porcupine returns the nondeterministic porcupine model of a store's keys,
// partitioned by key: a history is linearizable if and only if each key's
// history is.
func Porcupine(cfg Config) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: PartitionByKey,
		Init:      func() []interface{} { return []interface{}{State{}} },
		Step: func(state, input, output interface{}) []interface{} {
			next := Step(cfg, state.(State), input.(Input), output.(Output))
			res := make([]interface{}, len(next))
			for i, n := range next {
				res[i] = n
			}
			return res
		},
		Equal: func(a, b interface{}) bool { return Equal(a.(State), b.(State)) },
		Hash:  func(s interface{}) uint64 { return Hash(s.(State)) },
		DescribeOperation: func(input, output interface{}) string {
			return DescribeOperation(input.(Input), output.(Output))
		},
		DescribeState: func(s interface{}) string { return DescribeState(s.(State)) },
	}
	return nm.ToModel()
}

// PartitionByKey splits a history into one history per key, in order of
// first appearance.
func PartitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	index := map[stores.KeyRef]int{}
	var parts [][]porcupine.Operation
	for _, op := range history {
		k := op.Input.(Input).Key
		i, ok := index[k]
		if !ok {
			i = len(parts)
			index[k] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}
