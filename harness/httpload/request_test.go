package httpload

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
)

// TestKeyFormats: each format makes distinct keys of its shape.
func TestKeyFormats(t *testing.T) {
	var seq atomic.Int64
	for _, tc := range []struct {
		format string
		shape  *regexp.Regexp
	}{
		{KeyUUID, regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)},
		{KeyULID, regexp.MustCompile(`^[0-7][0-9A-HJKMNP-TV-Z]{25}$`)},
		{"pay_%s_%06d", regexp.MustCompile(`^pay_run7_[0-9]{6}$`)},
		{"k-%8x-100%%", regexp.MustCompile(`^k-[0-9a-f]{8}-100%$`)},
	} {
		k := newKeys(tc.format, "run7", 1, 0, &seq)
		seen := map[string]bool{}
		for i := 0; i < 200; i++ {
			key := k.next()
			if !tc.shape.MatchString(key) {
				t.Fatalf("%s: key %q is not of its shape", tc.format, key)
			}
			if seen[key] {
				t.Fatalf("%s: key %q made twice", tc.format, key)
			}
			seen[key] = true
		}
	}
	if a, b := newKeys(KeyUUID, "runA", 1, 0, &seq).next(), newKeys(KeyUUID, "runB", 1, 0, &seq).next(); a == b {
		t.Errorf("two runs with one seed made the same first key %s", a)
	}
}

// TestBodies: the order and amount go where the request says, in a JSON
// template (keeping its other fields) or a form; bad requests are refused.
func TestBodies(t *testing.T) {
	r, err := Request{Body: `{"payment":{"currency":"EUR"},"capture":true}`, OrderAt: "payment.ref", AmountAt: "payment.cents"}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := r.body("o1", 512)
	var got map[string]any
	if err := json.Unmarshal([]byte(b), &got); err != nil {
		t.Fatal(err)
	}
	p := got["payment"].(map[string]any)
	if p["ref"] != "o1" || p["cents"] != 512.0 || p["currency"] != "EUR" || got["capture"] != true || r.contentType() != "application/json" {
		t.Errorf("JSON body %s", b)
	}
	r, err = Request{BodyType: BodyForm, Body: "currency=EUR", OrderAt: "reference", AmountAt: "amount_cents"}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	b, _ = r.body("o2", 7)
	v, err := url.ParseQuery(b)
	if err != nil || v.Get("reference") != "o2" || v.Get("amount_cents") != "7" || v.Get("currency") != "EUR" || !strings.HasPrefix(r.contentType(), "application/x-www-form-urlencoded") {
		t.Errorf("form body %q: %v", b, err)
	}
	// A form's names are whole: dots in them name nothing inside.
	if _, err := (Request{BodyType: BodyForm, OrderAt: "payment", AmountAt: "payment.cents"}).Normalize(); err != nil {
		t.Errorf("form names with dots: %v", err)
	}
	if r.Method != "POST" || r.KeyFormat != KeyUUID {
		t.Errorf("defaults: %+v", r)
	}
	for _, bad := range []Request{
		{KeyFormat: "static-key"},
		{KeyFormat: "run-%s"},
		{BodyType: "xml"},
		{Body: `[1,2]`},
		{Body: `{"payment":"x"}`, OrderAt: "payment.ref"},
		{OrderAt: "x", AmountAt: "x"},
		{OrderAt: "a..b"},
		{OrderAt: ".a"},
		{AmountAt: "cents."},
		{OrderAt: "payment.ref", AmountAt: "payment"},
		{OrderAt: "payment", AmountAt: "payment.cents.value"},
		{Body: `null`},
		{Body: `{} {}`},
		{Body: `"x"`},
		{KeyAt: "order"},
		{KeyAt: "k", KeyHeader: "X-K"},
		{KeyAt: "payment.ref.key", OrderAt: "payment.ref"},
		{KeyAt: "meta", AmountAt: "meta.cents"},
		{KeyAt: "a..b"},
		{KeyHeader: "Bad Header"},
		{KeyHeader: "X-Key", Header: http.Header{"X-Key": {"v"}}},
	} {
		if _, err := bad.Normalize(); err == nil {
			t.Errorf("%+v: accepted", bad)
		}
	}
}
