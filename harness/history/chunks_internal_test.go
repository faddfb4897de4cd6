package history

import (
	"cmp"
	"slices"
	"testing"
)

// TestOpsAcrossChunks: calls recorded across many chunks are scanned by
// Has and HasSince from a mark, and Ops gives them in call order, once
// sorted never changing after more are recorded.
func TestOpsAcrossChunks(t *testing.T) {
	h := New()
	n := 3*opChunk + 17
	for i := 0; i < n; i++ {
		call := int64(i)
		if i%500 == 499 {
			call = int64(i - 300) // out of call order
		}
		h.AddOp(Op{Client: i, Call: call, Return: call + 1})
	}
	if h.OpCount() != n {
		t.Fatalf("%d ops, want %d", h.OpCount(), n)
	}
	m := Mark{n: 2*opChunk + 5, sorts: 0}
	is := func(c int) func(Op) bool { return func(op Op) bool { return op.Client == c } }
	if !h.Has(is(0)) || !h.Has(is(n-1)) || h.Has(is(n)) {
		t.Error("Has misses a recorded call, or finds one never recorded")
	}
	if h.HasSince(m, is(2*opChunk+4)) || !h.HasSince(m, is(2*opChunk+5)) || !h.HasSince(m, is(n-1)) {
		t.Error("HasSince looks before its mark, or misses what came after it")
	}
	ops := h.Ops()
	if len(ops) != n || !slices.IsSortedFunc(ops, func(a, b Op) int { return cmp.Compare(a.Call, b.Call) }) {
		t.Fatalf("Ops: %d ops, sorted %v", len(ops), slices.IsSortedFunc(ops, func(a, b Op) int { return cmp.Compare(a.Call, b.Call) }))
	}
	if !h.HasSince(m, is(0)) { // sorted since the mark: every call is looked at
		t.Error("HasSince after a sort does not look at every call")
	}
	first := ops[0]
	h.AddOp(Op{Client: -1, Call: -5})
	if ops[0] != first || len(h.Ops()) != n+1 || h.Ops()[0].Client != -1 {
		t.Error("a returned slice changed, or the new call is not in the next Ops")
	}
}
