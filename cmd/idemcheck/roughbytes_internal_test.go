package main

import "testing"

// TestRoughBytes: sizes under a megabyte read in kilobytes (a warning
// that a run would write "about 0 MB" where "0 MB" was free said
// nothing), rounded up; then megabytes, then gigabytes.
func TestRoughBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 KB", 1: "1 KB", 16 << 10: "16 KB", 3 << 20: "3 MB", 3 << 30: "3.0 GB"} {
		if got := roughBytes(n); got != want {
			t.Errorf("roughBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
