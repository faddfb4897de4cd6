package harness_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/stores"
)

// lossyAnswers is a store that saves an answer through a lossy encoding:
// what Complete is given is not what Begin replays.
type lossyAnswers struct {
	stores.Store
	lose func(string) string
}

func (s lossyAnswers) Complete(ctx context.Context, key stores.KeyRef, tok stores.Token, resp stores.Response) error {
	resp.Body = s.lose(resp.Body)
	return s.Store.Complete(ctx, key, tok, resp)
}

// TestLossyAnswersAreCaught: answers carry text a careless store loses
// (workload.Tails), so a store that saves them in a 3-byte UTF-8 column
// (MySQL's utf8: an emoji becomes '?'), in a 255-character column, or
// trimmed, replays an answer that was never saved. With plain answers all
// three passed.
func TestLossyAnswersAreCaught(t *testing.T) {
	losses := map[string]func(string) string{
		"3-byte UTF-8 column": func(b string) string {
			return strings.Map(func(r rune) rune {
				if r > 0xFFFF {
					return '?'
				}
				return r
			}, b)
		},
		"255 characters": func(b string) string {
			if r := []rune(b); len(r) > 255 {
				return string(r[:255])
			}
			return b
		},
		"trimmed": func(b string) string { return strings.TrimRight(b, " \r\n\t") },
	}
	for name, lose := range losses {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := harnesstest.Options(t, "memory", stores.Correct, "race")
			wrapStores(&o, func(s stores.Store) stores.Store { return lossyAnswers{s, lose} })
			sum, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Verdict != check.Fail {
				t.Fatalf("a store that saves answers through %s: %s, want fail", name, sum.Verdict)
			}
			v := sum.Violations[0]
			t.Logf("caught by %s on %s: %.200s", v.Checker, v.Key, v.Detail)
		})
	}
}
