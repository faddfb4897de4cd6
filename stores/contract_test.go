package stores

import (
	"encoding/json"
	"strings"
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
	// Apart to the eye too: a decomposed é printed as the composed one.
	if a, b := (KeyRef{"t0", "café"}).String(), (KeyRef{"t0", "cafe\u0301"}).String(); a != "t0/café" || b != `t0/"cafe\u0301"` {
		t.Errorf("café composed and decomposed print as %s and %s, want t0/café and t0/\"cafe\\u0301\"", a, b)
	}
}

// TestResponseSavesEveryBodyApart: bodies that differ only in bytes
// encoding/json would replace (invalid UTF-8) survive a JSON round trip
// byte for byte, and a plain body keeps the old form.
func TestResponseSavesEveryBodyApart(t *testing.T) {
	bodies := []Response{
		{201, "charged"}, {201, ""}, {201, "a\x00b\xff\r\n \t"}, {201, "a\x00b\xfe\r\n \t"},
		{200, strings.Repeat("é", 300)}, {409, `{"a":"b"}`},
	}
	seen := map[string]Response{}
	for _, r := range bodies {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if other, dup := seen[string(b)]; dup {
			t.Errorf("%q and %q both save as %s", other.Body, r.Body, b)
		}
		seen[string(b)] = r
		var back Response
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back != r {
			t.Errorf("%q → %s → %q", r.Body, b, back.Body)
		}
	}
	if b, _ := json.Marshal(Response{201, "ok"}); string(b) != `{"status":201,"body":"ok"}` {
		t.Errorf("a plain body saves as %s", b)
	}
}

// A token is written as a JSON string when it is text, as before, and as
// base64 when it is not: two tokens of raw bytes that differ only in
// invalid bytes read back as two, byte for byte (encoding/json alone
// made both "\ufffd\ufffd").
func TestTokenJSONKeepsBytes(t *testing.T) {
	for _, tc := range []struct {
		tok  Token
		want string
	}{
		{"9f2c4e", `"9f2c4e"`},
		{"", `""`},
		{"a\"b<", `"a\"b\u003c"`},
		{"\xff\xfe", `{"b64":"//4="}`},
		{"\xfe\xff", `{"b64":"/v8="}`},
	} {
		b, err := json.Marshal(tc.tok)
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal(%q) = %s, %v; want %s", tc.tok, b, err, tc.want)
			continue
		}
		var back Token
		if err := json.Unmarshal(b, &back); err != nil || back != tc.tok {
			t.Errorf("Unmarshal(%s) = %q, %v; want %q", b, back, err, tc.tok)
		}
	}
	var bad Token
	if err := json.Unmarshal([]byte(`{"b64":"%%"}`), &bad); err == nil {
		t.Errorf("a token of bad base64 read as %q, want an error", bad)
	}
}
