package workload

import (
	"slices"
	"strings"

	"github.com/idemcheck/idemcheck/stores"
)

// HostileTokens are tokens a store must fence on a key whose owner holds
// real (the abuse scenario and idemtest's model test send them): none, a
// made-up one, the wildcards of LIKE, glob and regular expressions alone
// and after the real token's first half, that half alone, and the real
// token in upper case. A store that compares tokens with LIKE or a
// pattern, by prefix or without case, accepts one of them where only real
// may pass. Any that equals real is left out.
func HostileTokens(real stores.Token) []stores.Token {
	half := real[:len(real)/2]
	cands := []stores.Token{"", "made-up-token", "%", "_", "*", "?", "[0-9a-f]*", ".*",
		half, half + "%", half + "*", stores.Token(strings.ToUpper(string(real)))}
	out := cands[:0]
	for _, t := range cands {
		if t != real && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}
