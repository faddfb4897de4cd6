package stores

import (
	"regexp"
	"strings"
)

// StoredKey is the key a store of the variant stores and looks up for the
// caller's key k: k itself for every variant but the key mutants, which
// re-create how careless stores merge distinct keys. Each backend passes
// every key through it at the top of Begin, Complete and Release, so the
// mutants are this one function.
func StoredKey(variant string, k KeyRef) KeyRef {
	switch variant {
	case "case-folded-key":
		// A case-insensitive collation or index (or a lower() on the way
		// in): "KEY-1" and "key-1" are one record.
		return KeyRef{Tenant: k.Tenant, Key: strings.ToLower(k.Key)}
	case "tenant-blind":
		// The lookup leaves the tenant out: two customers' "key-1" are
		// one record.
		return KeyRef{Key: k.Key}
	case "joined-key":
		// The tenant and the key joined by ":" into one lookup key, with
		// neither length nor escape: tenant "t:x" with key "k" and tenant
		// "t" with key "x:k" are one record.
		return KeyRef{Key: k.Tenant + ":" + k.Key}
	}
	return k
}

// StoredFingerprint is the fingerprint a store of the variant compares
// for the caller's fp: fp itself for every variant but
// fingerprint-drops-amount, which re-creates a fingerprint normalised by
// a careless canonicalisation (the amount's value parsed away, a numeric
// field dropped from a hash): a key reused with another amount is
// replayed the first answer. Each backend passes the fingerprint through
// it at the top of Begin, so the mutant is this one function.
func StoredFingerprint(variant, fp string) string {
	if variant == "fingerprint-drops-amount" {
		return amountValue.ReplaceAllString(fp, "amount=")
	}
	return fp
}

var amountValue = regexp.MustCompile(`amount=[0-9]+`)
