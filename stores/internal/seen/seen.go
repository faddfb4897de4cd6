// Package seen is a hint of the keys a store has decided a Begin on, for
// the stores that can decide a Begin in either of two orders (claim
// first, or read first) and want the cheaper one for each key.
package seen

import "sync/atomic"

// Keys is a hint of the keys a Store has decided a Begin on: a bit per
// hash of the stored key, in a fixed table. It only chooses which of two
// correct orders a Begin tries first: a key not seen is most likely new,
// and is claimed first and read only if the claim finds it there; a key
// seen (a retry) is read first, so that a replay, a 409 or a 422 takes
// the read alone. A wrong hint costs a round trip, never a wrong answer:
// another process's keys are not seen here, a hash collision makes a new
// key look seen, and a cleared table forgets every key.
//
// The hash is FNV-1a, the same in every process: a run that sends the
// same keys in the same order takes the same paths, so a scheduled run's
// round trips, and its trace, do not depend on a random hash seed (with
// one, a rare collision changed them from one run to the next). Keys made
// to collide cost their sender a round trip, nothing more.
//
// Bounds: the table is Bits bits (128 KiB); once half of them are set it
// is cleared, so that it does not fill up and call every key seen. Safe
// for concurrent use.
type Keys struct {
	bits [Bits / 64]atomic.Uint64
	set  atomic.Int64 // bits set since the last clear
}

// Bits is the size of a table, in bits.
const Bits = 1 << 20

// New returns an empty table.
func New() *Keys { return &Keys{} }

// slot is the key's bit: FNV-1a of the tenant, a zero byte and the key.
func (s *Keys) slot(tenant, key string) (word int, bit uint64) {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(tenant); i++ {
		h = (h ^ uint64(tenant[i])) * prime
	}
	h *= prime // the zero byte between them
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * prime
	}
	n := h % Bits
	return int(n / 64), 1 << (n % 64)
}

// Seen says whether the key was marked (false: surely not, since the
// last clear), and marks nothing: a caller that marks a key only once
// its Begin is decided (Mark) sends every first call of a race by the
// same path.
func (s *Keys) Seen(tenant, key string) bool {
	w, b := s.slot(tenant, key)
	return s.bits[w].Load()&b != 0
}

// Mark marks the key seen (See, its answer dropped).
func (s *Keys) Mark(tenant, key string) { s.See(tenant, key) }

// See marks the key seen and says whether it was seen before (false:
// surely not, since the last clear). The key that makes the table half
// full clears it, itself included. A key seen before costs a load, not a
// write: every retry's Begin asks, and the writes of many goroutines to
// the same word would contend for its cache line.
func (s *Keys) See(tenant, key string) (before bool) {
	w, b := s.slot(tenant, key)
	if s.bits[w].Load()&b != 0 || s.bits[w].Or(b)&b != 0 {
		return true
	}
	if s.set.Add(1) >= Bits/2 {
		s.set.Store(0)
		for i := range s.bits {
			s.bits[i].Store(0)
		}
	}
	return false
}
