package stores

import (
	"context"
	"fmt"
)

// RowShower is implemented by stores that can show a key's stored row on
// one line, for a demo's step-by-step (idemcheck demo prints the row after
// each step). It is not part of the contract: no check depends on it, and
// a store without it just shows no row.
type RowShower interface {
	// ShowRow describes the key's row as stored now (RowLine), or says
	// there is none ("no row"). It must not wait on a lock a client may
	// hold: a demo calls it while clients wait inside their calls.
	ShowRow(ctx context.Context, key KeyRef) (string, error)
}

// NoRow is what ShowRow says when the key has no row.
const NoRow = "no row"

// RowLine prints a row's fields alike for every store: its status, the
// owner's token (shortened), the fingerprint, and the saved response.
func RowLine(status, token, fingerprint string, respStatus int, respBody string) string {
	if len(token) > 16 {
		token = token[:8] + "…"
	}
	s := fmt.Sprintf("status=%s token=%s fingerprint=%q", status, token, fingerprint)
	if respStatus != 0 {
		if r := []rune(respBody); len(r) > 32 {
			respBody = string(r[:32]) + "…"
		}
		s += fmt.Sprintf(" response=%d %q", respStatus, respBody)
	}
	return s
}
