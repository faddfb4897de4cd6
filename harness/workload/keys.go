package workload

import (
	"fmt"
	"strings"

	"github.com/idemcheck/idemcheck/stores"
)

// The adversarial key space. Real keys are not all "order-o001": they
// come from many tenants and clients, in any case and encoding, and a store
// that compares them carelessly merges two operations into one (the second
// gets the first one's answer, or a 422). So the orders of a round take
// their keys from families of KeyVariants members; within a family, pairs
// of members differ in exactly one way that a careless store loses:
//
//	0  tenant T,    "key-FFF"             the plain key (FFF: the family)
//	1  tenant T,    "KEY-FFF"             case (with 0)
//	2  tenant T,    "key-FFF "            trailing whitespace (with 0)
//	3  tenant T/x,  "key-FFF"             the same name in another tenant (with 0)
//	4  tenant T,    P + "\x00FFF\xfe"     a long shared prefix P, a NUL and
//	5  tenant T,    P + "\x00FFF\xff"     invalid UTF-8, differing in the last byte
//	6  tenant T,    "café-FFF"            Unicode NFC
//	7  tenant T,    "café-FFF" (NFD)      the same text, NFD (with 6)
//	8  tenant T,    "x/key-FFF"           tenant and key joined by "/" (with 3)
//	9  tenant T up, "key-FFF"             the tenant's case (with 0)
//	10 tenant T:x,  "key-FFF"             tenant and key joined by ":", the
//	11 tenant T,    "x:key-FFF"           separator of most key-value stores
//	                                      (with each other: "T:x:key-FFF")
//
// P is 8, 16, 32, 64 or 128 bytes, or (family 0) long enough to make the
// key exactly 255 bytes (MaxKeyLen), the prefix then 250 bytes or more.
// A correct store keeps every one apart; the checkers, which compare keys
// byte for byte, see a merge as a replay nobody saved, a spurious 422, or
// an order charged on another order's claim.
const KeyVariants = 12

// prefixLens are the shared-prefix lengths of families 1, 2, …; family 0
// fills the key to MaxKeyLen.
var prefixLens = []int{8, 16, 32, 64, 128}

// KeyFor is the key of the i-th order of a round in tenant T, rotated by
// offset (so that every scenario's first orders cover different pairs of
// the family).
func KeyFor(tenant string, i, offset int) stores.KeyRef {
	m := (i + offset) % KeyVariants
	family := (i + offset) / KeyVariants
	id := fmt.Sprintf("%03d", family)
	name := "key-" + id
	switch m {
	case 1:
		return stores.KeyRef{Tenant: tenant, Key: strings.ToUpper(name)}
	case 2:
		return stores.KeyRef{Tenant: tenant, Key: name + " "}
	case 3:
		return stores.KeyRef{Tenant: tenant + "/x", Key: name}
	case 4, 5:
		last := "\xfe"
		if m == 5 {
			last = "\xff"
		}
		tail := "\x00" + id + last
		n := stores.MaxKeyLen - len(tail)
		if family > 0 {
			n = prefixLens[(family-1)%len(prefixLens)]
		}
		return stores.KeyRef{Tenant: tenant, Key: sharedPrefix(n) + tail}
	case 6:
		return stores.KeyRef{Tenant: tenant, Key: "caf\u00e9-" + id}
	case 7:
		return stores.KeyRef{Tenant: tenant, Key: "cafe\u0301-" + id}
	case 8:
		return stores.KeyRef{Tenant: tenant, Key: "x/" + name}
	case 9:
		return stores.KeyRef{Tenant: strings.ToUpper(tenant), Key: name}
	case 10:
		return stores.KeyRef{Tenant: tenant + ":x", Key: name}
	case 11:
		return stores.KeyRef{Tenant: tenant, Key: "x:" + name}
	}
	return stores.KeyRef{Tenant: tenant, Key: name}
}

// sharedPrefix is n bytes every long key of a family starts with.
func sharedPrefix(n int) string {
	const unit = "prefix-"
	return strings.Repeat(unit, n/len(unit)+1)[:n]
}

// KeyOffset is the rotation of a scenario's keys (see KeyFor): a
// function of its name, so a scenario always uses the same members.
func KeyOffset(scenario string) int {
	h := 0
	for _, c := range scenario {
		h = h*31 + int(c)
	}
	if h < 0 {
		h = -h
	}
	return h % KeyVariants
}

// DescribeKeySpace lists the pairs KeyFor makes, for docs and listings.
func DescribeKeySpace() string {
	return fmt.Sprintf("%d members per family: case, trailing whitespace, tenant, long shared prefix with NUL and invalid UTF-8 (up to %d bytes), NFC/NFD, tenant/key delimiters (\"/\" and \":\"), tenant case", KeyVariants, stores.MaxKeyLen)
}
