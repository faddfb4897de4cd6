package httpcheck

import (
	"cmp"
	"fmt"

	"github.com/idemcheck/idemcheck/harness/history"
)

// rekeyed says, of two effective charges of one order, what downstream
// keys they sent: a released claim is safe only when the retry sends the
// first attempt's key (the provider then answers the charge that went
// through), so a release on error is told with the keys that made it
// unsafe (a new key per request was said to be the release alone, which
// the docs call correct).
func rekeyed(first, second history.Charge) string {
	if first.Key == "" && second.Key == "" {
		return "; the provider was sent no downstream key, so it could not tell the retry from a new charge (with the first attempt's key the release would be safe)"
	}
	return fmt.Sprintf("; the retry sent the provider a new downstream key (%s, then %s), so it could not tell the retry from a new charge (with the first attempt's key the release would be safe)", cmp.Or(first.Key, "none"), cmp.Or(second.Key, "none"))
}
