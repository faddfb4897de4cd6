package httpload

import (
	"testing"
	"time"
)

// TestRetryAfter: seconds or an HTTP date, as RFC 9110 writes them; a
// date past, a negative number or text it cannot read is no wait.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		h    string
		want time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{"-1", 0},
		{"Sun, 06 Dec 2026 12:00:05 GMT", 5 * time.Second},
		{"Sun, 06 Dec 2026 11:59:00 GMT", 0},
		{"soon", 0},
	} {
		if got := retryAfter(c.h, now); got != c.want {
			t.Errorf("retryAfter(%q) = %v, want %v", c.h, got, c.want)
		}
	}
}
