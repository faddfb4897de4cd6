package servers

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestDockerCallIsBounded: a Docker call that does not answer fails once
// dockerCallTimeout passes, with an error that names it; one the caller
// cancels fails with the caller's own error; one that answers passes its
// result through.
func TestDockerCallIsBounded(t *testing.T) {
	defer func(d time.Duration) { dockerCallTimeout = d }(dockerCallTimeout)
	dockerCallTimeout = 50 * time.Millisecond
	hang := func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() }
	_, err := docker(context.Background(), "network disconnect", hang)
	if err == nil || !strings.Contains(err.Error(), "docker network disconnect did not answer within 50ms") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a hung call: %v, want it bounded and named", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := docker(ctx, "pause", hang); !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "did not answer") {
		t.Errorf("a call the caller cancelled: %v, want its own error", err)
	}
	if v, err := docker(context.Background(), "inspect", func(context.Context) (int, error) { return 7, nil }); v != 7 || err != nil {
		t.Errorf("an answered call: %d, %v", v, err)
	}
}
