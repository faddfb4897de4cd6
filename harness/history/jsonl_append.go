package history

import (
	"encoding/base64"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// appendOpLine appends the line of history.jsonl that records op, byte
// for byte what encoding/json's Encoder writes for Line{Scenario, "op",
// &op} (TestOpLineIsEncodingJSON holds it to that on random ops, and
// fails when a field is added that it does not write). ok is false, and
// b unchanged, for an op it leaves to encoding/json (a time that
// time.Time refuses to marshal, so that the error stays its own). An op is most of
// a history's lines, and reflection made its encoding three quarters of
// the time a run spent writing its files.
func appendOpLine(b []byte, scenario string, op *Op) (_ []byte, ok bool) {
	start := len(b)
	if b, ok = appendOp(appendLineHead(b, scenario, "op"), op); !ok {
		return b[:start], false
	}
	return append(b, "}\n"...), true
}

// appendOp appends op as encoding/json writes it (see appendOpLine); ok
// is false, and b unchanged, for an op it leaves to encoding/json.
func appendOp(b []byte, op *Op) (_ []byte, ok bool) {
	in, out := &op.Input, &op.Output
	for _, t := range []time.Time{in.Now, in.Called, in.Sent, out.Decision.DecidedAt, out.Decision.LeaseUntil} {
		if !marshalable(t) {
			return b, false
		}
	}
	b = append(b, `{"client":`...)
	b = strconv.AppendInt(b, int64(op.Client), 10)
	b = append(b, `,"input":`...)
	b = appendInput(b, in)
	b = append(b, `,"output":`...)
	b = appendOutput(b, out)
	b = append(b, `,"call":`...)
	b = strconv.AppendInt(b, op.Call, 10)
	b = append(b, `,"return":`...)
	b = strconv.AppendInt(b, op.Return, 10)
	if op.Err != "" {
		b = append(b, `,"err":`...)
		b = appendJSONString(b, op.Err)
	}
	if op.ErrAt != 0 {
		b = append(b, `,"err_at":`...)
		b = strconv.AppendInt(b, op.ErrAt, 10)
	}
	if op.Deadline {
		b = append(b, `,"deadline":true`...)
	}
	if op.Lost {
		b = append(b, `,"lost":true`...)
	}
	return append(b, '}'), true
}

// appendAnswerLine appends the line of history.jsonl that records a, as
// appendOpLine does an op's: a client's answers are about as many as
// its calls.
func appendAnswerLine(b []byte, scenario string, a *Answer) []byte {
	b = appendLineHead(b, scenario, "answer")
	b = append(b, `{"client":`...)
	b = strconv.AppendInt(b, int64(a.Client), 10)
	b = append(b, `,"key":`...)
	b = appendKey(b, a.Key)
	b = append(b, `,"order":`...)
	b = appendJSONString(b, a.Order)
	b = append(b, `,"fingerprint":`...)
	b = appendJSONString(b, a.Fingerprint)
	b = append(b, `,"response":`...)
	b = appendResponse(b, a.Response)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(a.Status), 10)
	if a.Replayed {
		b = append(b, `,"replayed":true`...)
	}
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(a.Attempts), 10)
	if a.Err != "" {
		b = append(b, `,"err":`...)
		b = appendJSONString(b, a.Err)
	}
	b = append(b, `,"at":`...)
	b = strconv.AppendInt(b, a.At, 10)
	return append(b, "}}\n"...)
}

func appendInput(b []byte, in *models.Input) []byte {
	b = append(b, `{"kind":`...)
	b = strconv.AppendInt(b, int64(in.Kind), 10)
	b = append(b, `,"key":`...)
	b = appendKey(b, in.Key)
	if in.Fingerprint != "" {
		b = append(b, `,"fingerprint":`...)
		b = appendJSONString(b, in.Fingerprint)
	}
	if in.Token != "" {
		b = append(b, `,"token":`...)
		b = appendToken(b, in.Token)
	}
	b = append(b, `,"response":`...)
	b = appendResponse(b, in.Response)
	b = append(b, `,"now":`...)
	b = appendTime(b, in.Now)
	b = append(b, `,"id":`...)
	b = strconv.AppendInt(b, int64(in.ID), 10)
	if in.Lease != 0 {
		b = append(b, `,"lease":`...)
		b = strconv.AppendInt(b, int64(in.Lease), 10)
	}
	// omitempty leaves a struct in, so a zero time is written.
	b = append(b, `,"called":`...)
	b = appendTime(b, in.Called)
	b = append(b, `,"sent":`...)
	b = appendTime(b, in.Sent)
	return append(b, '}')
}

func appendOutput(b []byte, out *models.Output) []byte {
	b = append(b, '{')
	if out.Unknown {
		b = append(b, `"unknown":true,`...)
	}
	d := &out.Decision
	b = append(b, `"decision":{"outcome":`...)
	b = strconv.AppendInt(b, int64(d.Outcome), 10)
	if d.Token != "" {
		b = append(b, `,"token":`...)
		b = appendToken(b, d.Token)
	}
	if d.Takeover {
		b = append(b, `,"takeover":true`...)
	}
	b = append(b, `,"response":`...)
	b = appendResponse(b, d.Response)
	b = append(b, `,"decided_at":`...)
	b = appendTime(b, d.DecidedAt)
	if d.Fence != 0 {
		b = append(b, `,"fence":`...)
		b = strconv.AppendUint(b, d.Fence, 10)
	}
	if !d.LeaseUntil.IsZero() {
		b = append(b, `,"lease_until":`...)
		b = appendTime(b, d.LeaseUntil)
	}
	b = append(b, '}')
	if out.Fenced {
		b = append(b, `,"fenced":true`...)
	}
	if out.NotApplied {
		b = append(b, `,"not_applied":true`...)
	}
	return append(b, '}')
}

// appendKey writes what stores.KeyRef's MarshalJSON writes: each part as
// text when it is valid UTF-8, else as base64 after the text fields.
func appendKey(b []byte, k stores.KeyRef) []byte {
	tv, kv := utf8.ValidString(k.Tenant), utf8.ValidString(k.Key)
	b = append(b, '{')
	sep := func() {
		if b[len(b)-1] != '{' {
			b = append(b, ',')
		}
	}
	if tv {
		b = append(b, `"tenant":`...)
		b = appendJSONString(b, k.Tenant)
	}
	if kv {
		sep()
		b = append(b, `"key":`...)
		b = appendJSONString(b, k.Key)
	}
	if !tv {
		sep()
		b = appendB64(append(b, `"tenant_b64":`...), k.Tenant)
	}
	if !kv {
		sep()
		b = appendB64(append(b, `"key_b64":`...), k.Key)
	}
	return append(b, '}')
}

// appendResponse writes what stores.Response's MarshalJSON writes.
func appendResponse(b []byte, r stores.Response) []byte {
	b = append(b, `{"status":`...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	if utf8.ValidString(r.Body) {
		b = append(b, `,"body":`...)
		b = appendJSONString(b, r.Body)
	} else {
		b = appendB64(append(b, `,"body_b64":`...), r.Body)
	}
	return append(b, '}')
}

// appendToken writes what stores.Token's MarshalJSON writes.
func appendToken(b []byte, t stores.Token) []byte {
	if utf8.ValidString(string(t)) {
		return appendJSONString(b, string(t))
	}
	return append(appendB64(append(b, `{"b64":`...), string(t)), '}')
}

func appendB64(b []byte, s string) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, []byte(s))
	return append(b, '"')
}

// marshalable reports whether time.Time's MarshalJSON accepts t: a year
// from 0 to 9999 and a zone offset under 24 hours.
func marshalable(t time.Time) bool {
	_, off := t.Zone()
	return t.Year() >= 0 && t.Year() <= 9999 && off > -24*3600 && off < 24*3600
}

// appendTime writes what time.Time's MarshalJSON writes, for a year it
// accepts (appendOpLine leaves the others to it).
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendJSONString writes s as encoding/json writes a string, byte for
// byte (its appendString, with HTML escaping on, as Marshal and an
// Encoder use it): `"` and `\` escaped, \b \f \n \r \t by name, the
// other control bytes and < > & as \u00XX, U+2028 and U+2029 as \u2028
// and \u2029, each byte of invalid UTF-8 as \ufffd. Answers' bodies are
// text a careless store loses (workload.Tails), so most need an escape:
// through json.Marshal they were a third of writing history.jsonl.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendWork appends w as encoding/json writes it: a work line of
// history.jsonl and of the journal (TestWorkLineIsEncodingJSON), one per
// claim a client worked on, made under the lock every client records
// through.
func appendWork(b []byte, w *WorkRun) []byte {
	b = append(b, `{"client":`...)
	b = strconv.AppendInt(b, int64(w.Client), 10)
	b = append(b, `,"key":`...)
	b = appendKey(b, w.Key)
	b = append(b, `,"order":`...)
	b = appendJSONString(b, w.Order)
	b = append(b, `,"token":`...)
	b = appendToken(b, w.Token)
	b = append(b, `,"start":`...)
	b = strconv.AppendInt(b, w.Start, 10)
	b = append(b, `,"end":`...)
	b = strconv.AppendInt(b, w.End, 10)
	if w.Failed {
		b = append(b, `,"failed":true`...)
	}
	if w.ChargeID != "" {
		b = append(b, `,"charge_id":`...)
		b = appendJSONString(b, w.ChargeID)
	}
	if w.Planned != 0 {
		b = append(b, `,"planned_ns":`...)
		b = strconv.AppendInt(b, int64(w.Planned), 10)
	}
	if w.Beat != 0 {
		b = append(b, `,"beat_ns":`...)
		b = strconv.AppendInt(b, int64(w.Beat), 10)
	}
	return append(b, '}')
}

// appendWorkEnd appends e as encoding/json writes it (a journal line).
func appendWorkEnd(b []byte, e *workEnd) []byte {
	b = append(b, `{"end":`...)
	b = strconv.AppendInt(b, e.End, 10)
	if e.Failed {
		b = append(b, `,"failed":true`...)
	}
	if e.ChargeID != "" {
		b = append(b, `,"charge_id":`...)
		b = appendJSONString(b, e.ChargeID)
	}
	return append(b, '}')
}

// appendCharge appends c as encoding/json writes it: a charge line of
// history.jsonl and of the journal, one per order worked.
func appendCharge(b []byte, c *Charge) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, c.ID)
	b = append(b, `,"order":`...)
	b = appendJSONString(b, c.Order)
	if c.Key != "" {
		b = append(b, `,"key":`...)
		b = appendJSONString(b, c.Key)
	}
	b = append(b, `,"client":`...)
	b = strconv.AppendInt(b, int64(c.Client), 10)
	b = append(b, `,"at":`...)
	b = strconv.AppendInt(b, c.At, 10)
	b = append(b, `,"effective":`...)
	b = strconv.AppendBool(b, c.Effective)
	if c.Via != "" {
		b = append(b, `,"via":`...)
		b = appendJSONString(b, c.Via)
	}
	if c.End != 0 {
		b = append(b, `,"end":`...)
		b = strconv.AppendInt(b, c.End, 10)
	}
	if c.Outcome != "" {
		b = append(b, `,"outcome":`...)
		b = appendJSONString(b, c.Outcome)
	}
	return append(b, '}')
}

// appendLineHead appends the start of a history.jsonl line, as
// encoding/json's Encoder writes Line up to its value: {"scenario": …,
// "type": typ, typ: — the value, then "}\n", follow.
func appendLineHead(b []byte, scenario, typ string) []byte {
	b = append(b, `{"scenario":`...)
	b = appendJSONString(b, scenario)
	b = append(b, `,"type":"`...)
	b = append(b, typ...)
	b = append(b, `","`...)
	b = append(b, typ...)
	return append(b, `":`...)
}
