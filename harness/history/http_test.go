package history

import (
	"bytes"
	"reflect"
	"testing"
)

// TestExchangesRoundTrip: HTTP exchanges and effects by instance survive
// history.jsonl, so a black-box run can be read back whole.
func TestExchangesRoundTrip(t *testing.T) {
	h, l := New(), NewLedger()
	want := []Exchange{
		{Client: 1, Instance: "i1", Purpose: PurposeFirst, Key: "k", HasKey: true, Order: "o", Body: `{"order":"o"}`, Attempt: 1, Call: 10, Return: 20, Status: 200, Reply: `{"charge":"ch_1"}`},
		{Client: 2, Instance: "i2", Purpose: PurposeMissing, Order: "o2", Body: "{}", Attempt: 1, Call: 30, Return: Never, Err: "timeout", ErrAt: 40},
	}
	for _, x := range want {
		h.AddExchange(x)
	}
	if id := l.Effect("o", "i1", "", 15); id != "ch_1" {
		t.Fatalf("first effect id %s", id)
	}
	var buf bytes.Buffer
	if err := Write(&buf, "http", h, l); err != nil {
		t.Fatal(err)
	}
	saved, err := Load(&buf)
	if err != nil || len(saved) != 1 {
		t.Fatalf("load: %v (%d scenarios)", err, len(saved))
	}
	if got := saved[0].Hist.Exchanges(); !reflect.DeepEqual(got, want) {
		t.Errorf("exchanges: got %+v, want %+v", got, want)
	}
	if got := saved[0].Ledger.Charges(); len(got) != 1 || got[0].Via != "i1" || !got[0].Effective {
		t.Errorf("charges: %+v", got)
	}
}
