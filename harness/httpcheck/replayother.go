package httpcheck

import (
	"encoding/json"

	"github.com/idemcheck/idemcheck/harness/history"
)

// otherKeys finds, for a replay that is not its key's answer, the other
// key whose first success it is (JSON compared as a value): a replay
// served from another key's record (a shared buffer, a cache keyed
// wrongly). Its message named the first field that differed, in
// alphabetical order ("amount is 567, the first answer's 863"), where
// the body was plainly another order's. Built once, on the first
// violation.
type otherKeys struct {
	firsts []history.Exchange
	by     map[string]string // canonical reply → key ("" when two keys share it)
}

// of is the other key whose first success reply is, or "".
func (o *otherKeys) of(reply, key string) string {
	if o.by == nil {
		o.by = map[string]string{}
		for _, f := range o.firsts {
			c := canonical(f.Reply)
			if k, seen := o.by[c]; seen && k != f.Key {
				o.by[c] = ""
				continue
			}
			o.by[c] = f.Key
		}
	}
	if k := o.by[canonical(reply)]; k != key {
		return k
	}
	return ""
}

// canonical is a reply as a JSON value, re-encoded (field order and
// spacing aside), or the text itself when it is not JSON.
func canonical(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return s
	}
	return string(b)
}
