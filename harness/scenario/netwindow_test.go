package scenario_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults/netfault"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/nemesis"
)

// TestNetWindowHitSaysWhetherTrafficWasHit: through a real proxy, a
// latency window that no call passes through is kept on until its
// longest and says it hit nothing; one that a call passes through after
// its drawn length ends early and says it hit. Both are recorded as
// windows in the history.
func TestNetWindowHitSaysWhetherTrafficWasHit(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	defer up.Close()
	p, err := netfault.Start("inject-test", up.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h := history.New()
	ctx := context.Background()

	start := time.Now()
	hit, err := nemesis.NetWindowHit(ctx, h, p, nemesis.NetLatency, 10*time.Millisecond, 200*time.Millisecond, time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	if hit {
		t.Errorf("a window no traffic passed through says it hit")
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("a window that hit nothing ended after %v, before its longest (200ms)", took)
	}

	sent := make(chan error, 1)
	go func() {
		// Once the window is on (sent on a timer alone, a call a loaded
		// machine started before the window met no fault, and the window
		// stayed on to its longest), and past its drawn length.
		for deadline := time.Now().Add(30 * time.Second); !slices.Contains(p.Active(), nemesis.NetLatency); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				sent <- errors.New("the latency window never came on")
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
		res, err := http.Get("http://" + p.Addr() + "/")
		if err == nil {
			_, err = io.ReadAll(res.Body)
			res.Body.Close()
		}
		sent <- err
	}()
	start = time.Now()
	hit, err = nemesis.NetWindowHit(ctx, h, p, nemesis.NetLatency, 10*time.Millisecond, time.Minute, time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !hit {
		t.Errorf("a window a call passed through says it hit nothing")
	}
	if took := time.Since(start); took >= time.Minute {
		t.Errorf("a window that a call hit was kept on to its longest (%v)", took)
	}
	if err := <-sent; err != nil {
		t.Fatalf("the call through the proxy: %v", err)
	}
	if n := len(h.Faults()); n != 2 {
		t.Errorf("%d fault windows recorded, want 2", n)
	}
}
