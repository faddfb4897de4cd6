package idemtest

import (
	"errors"
	"fmt"
	"strings"

	"pgregory.net/rapid"

	"github.com/idemcheck/idemcheck/stores"
)

// invalid is the model test's step on an invalid key: a Begin, a save
// and a release of an empty or over-long key, each refused as the
// contract says.
func (d *driver) invalid(rt *rapid.T) {
	key := rapid.SampledFrom([]string{"", strings.Repeat("k", stores.MaxKeyLen+1)}).Draw(rt, "invalid key")
	k := stores.KeyRef{Tenant: tenants[0], Key: key}
	dec, err := d.store.Begin(d.ctx, stores.Request{KeyRef: k, Fingerprint: fingerprints[0], Now: d.earliest(0)})
	if err == nil {
		rt.Fatalf("Begin with a %d-byte key: want the invalid-key error, got a decision: %+v", len(key), dec)
	}
	if !d.invalidAnswer(rt, invalidBegin, fmt.Sprintf("Begin with a %d-byte key", len(key)), err, errors.Is(err, stores.ErrInvalidKey)) {
		return
	}
	// No key of that length can have been claimed, so a write to one is
	// refused either way: as invalid, or as fenced (no claim of that
	// token), which a store that checks keys only in Begin answers.
	err = d.store.Complete(d.ctx, k, "t", stores.Response{})
	if err == nil {
		rt.Fatalf("Complete with a %d-byte key: want the invalid-key error (or fenced), got a save", len(key))
	}
	if !d.invalidAnswer(rt, invalidWrite, fmt.Sprintf("Complete with a %d-byte key", len(key)), err, refusedInvalid(err)) {
		return
	}
	err = d.store.Release(d.ctx, k, "t")
	if err == nil {
		rt.Fatalf("Release with a %d-byte key: want the invalid-key error (or fenced), got a release", len(key))
	}
	d.invalidAnswer(rt, invalidWrite, fmt.Sprintf("Release with a %d-byte key", len(key)), err, refusedInvalid(err))
}

// invalidAnswer takes the error of a call with an invalid key (call
// names it): refused as the contract says (refused), or refused whole
// (stores.ErrNotApplied: it changed nothing, as such a call must), or
// an error that decides nothing (a timeout, a dropped connection), which
// ends the case there as at any other call: a correct store behind a
// lossy link errs on these calls too, and once failed the model test so.
// A store that never refuses an invalid key as the contract says is
// caught at the end, over all the cases (unknownCases.invalidNeverRefused).
// kind is the call's kind (invalidBegin, invalidWrite), each held to
// the contract apart. It reports whether the case goes on.
func (d *driver) invalidAnswer(rt *rapid.T, kind int, call string, err error, refused bool) bool {
	if u := d.errored; u != nil {
		u.mu.Lock()
		u.invalidCalls[kind]++
		if refused {
			u.invalidRefused[kind]++
		} else if u.invalidFirst[kind] == "" {
			u.invalidFirst[kind] = call + ": " + err.Error()
		}
		u.mu.Unlock()
	}
	switch {
	case refused:
		return true
	case errors.Is(err, stores.ErrNotApplied):
		d.notApplied++
		return true
	}
	d.unknown(rt, call, err)
	return false
}

// refusedInvalid reports whether err refuses a write to a key no claim
// can have: stores.ErrInvalidKey or stores.ErrFenced.
func refusedInvalid(err error) bool {
	return errors.Is(err, stores.ErrInvalidKey) || errors.Is(err, stores.ErrFenced)
}
