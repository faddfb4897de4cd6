package workload

import "math/rand"

// NewRand returns a Client.Rand seeded with seed, on a SplitMix64 source:
// seeding it costs nothing, where math/rand's default source fills 607
// words per seed. A scenario makes one client per key and client (a race
// over 10,000 keys makes 60,000), so that seeding was a fifth of the
// harness's CPU. The stream only jitters backoffs; it is as repeatable
// from its seed as before.
func NewRand(seed int64) *rand.Rand { return rand.New(&splitMix{state: uint64(seed)}) }

// splitMix is SplitMix64 (Steele, Lea and Flood, 2014) as a rand.Source64.
type splitMix struct{ state uint64 }

func (s *splitMix) Seed(seed int64) { s.state = uint64(seed) }

func (s *splitMix) Uint64() uint64 {
	s.state += 0x9e3779b97f4a7c15
	z := s.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (s *splitMix) Int63() int64 { return int64(s.Uint64() >> 1) }
