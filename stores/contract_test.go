package stores

import (
	"encoding/json"
	"testing"
)

// TestKeyRefPrintsAndSavesEveryKeyApart: keys that differ only in bytes a
// careless encoding loses (invalid UTF-8, NUL, a trailing space, a slash
// that moves between tenant and key) print differently and survive a JSON
// round trip byte for byte.
func TestKeyRefPrintsAndSavesEveryKeyApart(t *testing.T) {
	keys := []KeyRef{
		{"t0", "order-1"}, {"t0", "ORDER-1"}, {"t0", "order-1 "}, {"t0/x", "order-1"}, {"t0", "x/order-1"},
		{"t0", "p\x00o1\xfe"}, {"t0", "p\x00o1\xff"}, {"t0", "café"}, {"t0", "cafe\u0301"}, {"", "k"}, {"t0", `a"b`},
	}
	printed := map[string]KeyRef{}
	for _, k := range keys {
		s := k.String()
		if other, dup := printed[s]; dup {
			t.Errorf("%q and %q both print as %s", other, k, s)
		}
		printed[s] = k
		b, err := json.Marshal(k)
		if err != nil {
			t.Fatal(err)
		}
		var back KeyRef
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back != k {
			t.Errorf("%q → %s → %q", k, b, back)
		}
	}
	if got := (KeyRef{"t0", "order-1"}).String(); got != "t0/order-1" {
		t.Errorf("a plain key prints as %s", got)
	}
}
