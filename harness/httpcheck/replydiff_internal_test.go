package httpcheck

import "testing"

// TestReplyDiff: a replay that differs from the first answer names the
// first field that differs, by its path, whatever the order of fields
// or the spacing; equal values and bodies that are not JSON say nothing.
func TestReplyDiff(t *testing.T) {
	for _, tc := range []struct{ got, first, want string }{
		{`{"status":"ok","amount":722,"order":"o1"}`, `{"order": "o1", "amount": 721, "status": "ok"}`, `amount is 722, the first answer's 721`},
		{`{"amount":721.0,"order":"o1"}`, `{"order":"o1","amount":721}`, ``},
		{`{"charge":{"id":"ch_2"}}`, `{"charge":{"id":"ch_1"}}`, `charge.id is "ch_2", the first answer's "ch_1"`},
		{`{"items":[1,2]}`, `{"items":[1,2,3]}`, `items has 2 items, the first answer 3`},
		{`{"order":"o1"}`, `{"order":"o1","amount":5}`, `amount is missing (first answer: 5)`},
		{`{"order":"o1","replayed":true}`, `{"order":"o1"}`, `replayed is new (true), not in the first answer`},
		{`charged ch_2`, `charged ch_1`, ``},
		{`[1]`, `{"a":1}`, `the body is a list of 1, the first answer's an object`},
	} {
		if got := replyDiff(tc.got, tc.first); got != tc.want {
			t.Errorf("replyDiff(%s, %s) = %q, want %q", tc.got, tc.first, got, tc.want)
		}
	}
}
