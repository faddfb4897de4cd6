package history

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idemcheck/idemcheck/stores"
	"pgregory.net/rapid"
)

// texts are strings that encoding/json writes in every way it has: plain,
// escaped quotes and backslashes, control characters, HTML characters,
// U+2028, non-ASCII, invalid UTF-8 (which keys and bodies write as
// base64), and empty.
var texts = []string{"", "t0", "order-1", `a"b\c`, "\x00\x01\b\f\n\r\t\x1f", "<a&b>", "a<b", "c>d", "x\u2028y\u2029", "café 💳", "\xff\xfe", "ok\xc3", strings.Repeat("k", 255)}

// fill gives every field of v (a pointer to a struct) a random value, by
// its kind, so that a field added to Op or to what it holds is written
// by the test's encoder and must be by appendOpLine too.
func fill(t *rapid.T, v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(randomTime(t, path)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	case reflect.String:
		v.SetString(rapid.SampledFrom(texts).Draw(t, path))
	case reflect.Bool:
		v.SetBool(rapid.Bool().Draw(t, path))
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(rapid.OneOf(rapid.Just(int64(0)), rapid.Int64()).Draw(t, path))
	case reflect.Uint64, reflect.Uint:
		v.SetUint(rapid.OneOf(rapid.Just(uint64(0)), rapid.Uint64()).Draw(t, path))
	default:
		t.Fatalf("%s: a field of kind %s: teach appendOpLine (jsonl_append.go) and this test to write it", path, v.Kind())
	}
}

func randomTime(t *rapid.T, path string) time.Time {
	if rapid.Bool().Draw(t, path+"/zero") {
		return time.Time{}
	}
	zones := []*time.Location{time.UTC, time.FixedZone("", 5*3600+30*60), time.FixedZone("", -8*3600), time.FixedZone("", 45), time.FixedZone("", 25*3600), time.FixedZone("", -25*3600)}
	sec := rapid.Int64Range(-70_000_000_000, 300_000_000_000).Draw(t, path+"/sec")
	nsec := rapid.SampledFrom([]int64{0, 1, 500_000_000, 123_456_789, 999_999_999}).Draw(t, path+"/nsec")
	return time.Unix(sec, nsec).In(rapid.SampledFrom(zones).Draw(t, path+"/zone"))
}

// TestOpLineIsEncodingJSON: the line appendOpLine writes for an op is
// the one encoding/json's Encoder writes for it, byte for byte, on ops
// with every field random (texts that need every escape, times in odd
// zones); an op it declines is one encoding/json refuses too.
func TestOpLineIsEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var op Op
		fill(t, reflect.ValueOf(&op).Elem(), "op")
		scenario := rapid.SampledFrom(texts).Draw(t, "scenario")
		got, ok := appendOpLine([]byte("junk"), scenario, &op)
		sameAsEncodingJSON(t, Line{Scenario: scenario, Type: "op", Op: &op}, got, ok)
	})
}

// TestAnswerLineIsEncodingJSON: likewise for an answer's line.
func TestAnswerLineIsEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var a Answer
		fill(t, reflect.ValueOf(&a).Elem(), "answer")
		scenario := rapid.SampledFrom(texts).Draw(t, "scenario")
		sameAsEncodingJSON(t, Line{Scenario: scenario, Type: "answer", Answer: &a}, appendAnswerLine([]byte("junk"), scenario, &a), true)
	})
}

// sameAsEncodingJSON fails unless got, after the "junk" it was appended
// to, is the line encoding/json's Encoder writes for l; when ok is false
// (declined), encoding/json must refuse l and got be "junk" alone.
func sameAsEncodingJSON(t *rapid.T, l Line, got []byte, ok bool) {
	var want bytes.Buffer
	werr := json.NewEncoder(&want).Encode(l)
	switch {
	case !ok && werr == nil:
		t.Fatalf("declined a line encoding/json writes: %s", want.String())
	case !ok && string(got) != "junk":
		t.Fatalf("declined, and changed the buffer: %q", got)
	case ok && werr != nil:
		t.Fatalf("wrote a line encoding/json refuses (%v): %s", werr, got)
	case ok && string(got[4:]) != want.String():
		t.Fatalf("line differs from encoding/json's\n got: %s\nwant: %s", got[4:], want.String())
	}
}

// TestWriteLoadsBack: a history written with the fast op lines loads back
// as it was recorded (ops whose keys, bodies and tokens need escapes and
// base64 included: two tokens that differ only in invalid bytes stay two).
func TestWriteLoadsBack(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := New()
		for i := range rapid.IntRange(1, 5).Draw(t, "ops") {
			var op Op
			fill(t, reflect.ValueOf(&op.Input.Key).Elem(), "key")
			fill(t, reflect.ValueOf(&op.Output.Decision.Response).Elem(), "response")
			fill(t, reflect.ValueOf(&op.Input.Token).Elem(), "token")
			op.Output.Decision.Token = op.Input.Token + stores.Token(rapid.SampledFrom(texts).Draw(t, "decided token"))
			op.Client, op.Call, op.Return, op.Input.ID = i, int64(i), int64(i+1), i+1
			h.AddOp(op)
		}
		var buf bytes.Buffer
		if err := Write(&buf, "s", h, nil); err != nil {
			t.Fatal(err)
		}
		saved, err := Load(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if len(saved) != 1 || !reflect.DeepEqual(saved[0].Hist.Ops(), h.Ops()) {
			t.Fatalf("loaded %+v, wrote %+v", saved, h.Ops())
		}
	})
}

// TestJSONStringIsEncodingJSON: appendJSONString writes any string as
// json.Marshal does, byte for byte: random text, random bytes (invalid
// UTF-8 among them) and the texts that need every escape, run together.
func TestJSONStringIsEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.OneOf(
			rapid.String(),
			rapid.StringOf(rapid.RuneFrom([]rune{'"', '\\', '<', '>', '&', 0, 0x1f, 0x7f, '\b', '\f', '\n', '\r', '\t', '\u2028', '\u2029', 'é', '💳', utf8.RuneError})),
			rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) }),
			rapid.Map(rapid.SliceOfN(rapid.SampledFrom(texts), 0, 4), func(l []string) string { return strings.Join(l, "") }),
		).Draw(t, "s")
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString([]byte("junk"), s); string(got[4:]) != string(want) {
			t.Fatalf("%q:\n got: %s\nwant: %s", s, got[4:], want)
		}
	})
}

// TestWorkLineIsEncodingJSON: a work run's line in history.jsonl is the
// one encoding/json's Encoder writes, on work runs with every field random
// (a field added to WorkRun and not to appendWork fails it); its record
// in the journal is json.Marshal's, and so is a work run's end.
func TestWorkLineIsEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var w WorkRun
		fill(t, reflect.ValueOf(&w).Elem(), "work")
		scenario := rapid.SampledFrom(texts).Draw(t, "scenario")
		got := append(appendWork(appendLineHead([]byte("junk"), scenario, "work"), &w), "}\n"...)
		sameAsEncodingJSON(t, Line{Scenario: scenario, Type: "work", Work: &w}, got, true)
		sameAsMarshal(t, w)
		var e workEnd
		fill(t, reflect.ValueOf(&e).Elem(), "end")
		sameAsMarshal(t, e)
	})
}

// TestChargeLineIsEncodingJSON: likewise for a charge.
func TestChargeLineIsEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var c Charge
		fill(t, reflect.ValueOf(&c).Elem(), "charge")
		scenario := rapid.SampledFrom(texts).Draw(t, "scenario")
		got := append(appendCharge(appendLineHead([]byte("junk"), scenario, "charge"), &c), "}\n"...)
		sameAsEncodingJSON(t, Line{Scenario: scenario, Type: "charge", Charge: &c}, got, true)
		sameAsMarshal(t, c)
	})
}

// sameAsMarshal fails unless the journal encodes v (encodeRecord) as
// json.Marshal does.
func sameAsMarshal(t *rapid.T, v any) {
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if got := encodeRecord(v); string(got) != string(want) {
		t.Fatalf("%T differs from json.Marshal's\n got: %s\nwant: %s", v, got, want)
	}
}
