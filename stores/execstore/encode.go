package execstore

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/idemcheck/idemcheck/stores"
)

// appendBegin writes a begin request as json.Marshal would (the same
// fields, in any order a decoder accepts), without reflection: a begin is
// most of a run's requests, and its encoding was an eighth of a call's
// CPU on idemcheck's side.
func appendBegin(b []byte, id int64, trace bool, r *wireRequest) []byte {
	b = append(b, `{"type":"begin","id":`...)
	b = strconv.AppendInt(b, id, 10)
	if trace {
		b = append(b, `,"trace":true`...)
	}
	b = append(b, `,"request":{"key":`...)
	b = appendKey(b, r.Key)
	b = append(b, `,"fingerprint":`...)
	b = appendString(b, r.Fingerprint)
	b = append(b, `,"now_ms":`...)
	b = strconv.AppendFloat(b, r.NowMs, 'f', -1, 64)
	if r.LeaseMs != 0 {
		b = append(b, `,"lease_ms":`...)
		b = strconv.AppendFloat(b, r.LeaseMs, 'f', -1, 64)
	}
	return append(b, "}}"...)
}

// appendKey writes a KeyRef as its MarshalJSON does.
func appendKey(b []byte, k stores.KeyRef) []byte {
	b = appendTextOrB64(append(b, '{'), "tenant", k.Tenant)
	b = appendTextOrB64(append(b, ','), "key", k.Key)
	return append(b, '}')
}

func appendTextOrB64(b []byte, name, s string) []byte {
	if !utf8.ValidString(s) {
		enc, _ := json.Marshal([]byte(s)) // base64, quoted
		b = append(append(append(b, '"'), name...), `_b64":`...)
		return append(b, enc...)
	}
	b = append(append(append(b, '"'), name...), `":`...)
	return appendString(b, s)
}

// appendString writes valid UTF-8 text as a JSON string.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// appendDecision writes a begin's ok answer without a response (claimed,
// in-flight, mismatch) as json.Marshal would; ok is false for one it does
// not write (a replay, a token that is not UTF-8).
func appendDecision(b []byte, id int64, d *wireDecision) (_ []byte, ok bool) {
	if d.Response != nil || !utf8.ValidString(d.Token) {
		return b, false
	}
	b = append(b, `{"type":"ok","id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"decision":{"outcome":`...)
	b = appendString(b, d.Outcome)
	if d.Token != "" {
		b = append(b, `,"token":`...)
		b = appendString(b, d.Token)
	}
	if d.Fence != nil {
		b = append(b, `,"fence":`...)
		b = strconv.AppendUint(b, *d.Fence, 10)
	}
	if d.Takeover {
		b = append(b, `,"takeover":true`...)
	}
	if d.DecidedAtMs != nil {
		b = append(b, `,"decided_at_ms":`...)
		b = strconv.AppendFloat(b, *d.DecidedAtMs, 'f', -1, 64)
	}
	if d.LeaseUntilMs != nil {
		b = append(b, `,"lease_until_ms":`...)
		b = strconv.AppendFloat(b, *d.LeaseUntilMs, 'f', -1, 64)
	}
	return append(b, "}}"...), true
}
