package servers

import (
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// TestRunSharing: under RunSharing two tests asking SharedForTest for a
// Redis server get the same one, a container removed once RunSharing's
// tests have ended; outside it, a test gets a server of its own.
func TestRunSharing(t *testing.T) {
	clearEnv(t)
	var first, second *Server
	code := RunSharing(func() int {
		t.Run("first", func(t *testing.T) { first = SharedForTest(t, Redis) })
		t.Run("second", func(t *testing.T) { second = SharedForTest(t, Redis) })
		return 0
	})
	if code != 0 {
		t.Errorf("RunSharing returned %d for tests that passed", code)
	}
	if first == nil || first != second {
		t.Fatalf("two tests under RunSharing got %v and %v, want the one server", first, second)
	}
	cli, err := dockerClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	id := first.Container().GetContainerID()
	if _, err := cli.ContainerInspect(dockerCtx(t), id, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("the shared container %s after RunSharing: %v, want it removed", shortID(id), err)
	}
	if own := SharedForTest(t, Redis); own == first {
		t.Errorf("outside RunSharing SharedForTest gave the removed shared server")
	}
}
