package main

import (
	"math"
	"strings"
	"testing"
)

// TestSeedsFlag: --seeds takes a count or a range whose seeds may be
// negative ("-3--1" was refused as a first greater than its last), and
// refuses a range or count that runs past the largest seed (a soak ran
// the most negative seed after the largest, and lab ran none and
// panicked printing its empty table).
func TestSeedsFlag(t *testing.T) {
	for _, c := range []struct {
		arg      string
		seed     int64
		first    int64
		n        int
		wantErr  string
		parseErr bool
	}{
		{arg: "3", seed: 5, first: 5, n: 3},
		{arg: "1-10", first: 1, n: 10},
		{arg: "-3--1", first: -3, n: 3},
		{arg: "-2-2", first: -2, n: 5},
		{arg: "-3", parseErr: true},
		{arg: "5-1", parseErr: true},
		{arg: "2", seed: math.MaxInt64, wantErr: "runs past the largest seed"},
		{arg: "9223372036854775806-9223372036854775807", first: math.MaxInt64 - 1, n: 2},
	} {
		var s seedsFlag
		err := s.Set(c.arg)
		if c.parseErr {
			if err == nil {
				t.Errorf("--seeds %s: accepted", c.arg)
			}
			continue
		}
		if err != nil {
			t.Errorf("--seeds %s: %v", c.arg, err)
			continue
		}
		first, n, err := s.resolve(c.seed, false, 10, 1000)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("--seed %d --seeds %s: %v, want %q", c.seed, c.arg, err, c.wantErr)
			}
		case err != nil || first != c.first || n != c.n:
			t.Errorf("--seed %d --seeds %s: %d, %d, %v; want %d, %d", c.seed, c.arg, first, n, err, c.first, c.n)
		}
	}
	// Lab names its store's namespace after the seed: a negative one
	// was refused as no namespace letter.
	if code, stdout, stderr := runCLI(t, "lab", "--store", "memory", "--seed", "-7", "--orders", "20"); code == exitUsage {
		t.Errorf("lab --seed -7: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// The largest seed alone: its loop wrapped round and never ended.
	if code, stdout, stderr := runCLI(t, "lab", "--store", "memory", "--seed", "9223372036854775807", "--orders", "20"); code == exitUsage || !strings.Contains(stdout, "seed 9223372036854775807") {
		t.Errorf("lab --seed 9223372036854775807: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
