package faults

import "testing"

// TestShortTokenTellsTokensApart: a long token is shown by both its ends,
// so tokens that begin alike (a zero-padded fence number first) print
// apart; a short one is shown whole, and a cut never splits a character.
func TestShortTokenTellsTokensApart(t *testing.T) {
	for tok, want := range map[string]string{
		"v12":                                  "v12",
		"0000000000000005-3f2a9c1b7d0e4a66":    "00000000…4a66",
		"0000000000000006-9e1f00c2aa314b07":    "00000000…4b07",
		"8fe107d6-929d-4bee-a3eb-1fcfc5ecbba2": "8fe107d6…bba2",
		"tokén-with-ünïcode-at-both-enés":      "tokén-w…nés",
	} {
		if got := ShortToken(tok); got != want {
			t.Errorf("ShortToken(%q) = %q, want %q", tok, got, want)
		}
	}
}
