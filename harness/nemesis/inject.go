package nemesis

import (
	"context"
	"fmt"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/history"
)

// The network fault kinds, named as Proxy.Hits counts them (and as
// faults/netfault names them).
const (
	NetLatency   = string(history.CountNetLatency)
	NetReset     = string(history.CountNetReset)
	NetLostReply = string(history.CountNetLostReply)
)

// NetKinds lists the network fault kinds in the order reports print them.
var NetKinds = []string{NetLatency, NetReset, NetLostReply}

// NetOn switches one network fault on (latency: d plus or minus jitter).
func NetOn(p Proxy, kind string, d, jitter time.Duration) error {
	switch kind {
	case NetLatency:
		return p.Latency(d, jitter)
	case NetReset:
		return p.ResetConnections()
	case NetLostReply:
		return p.LoseReplies()
	}
	return fmt.Errorf("nemesis: unknown network fault %q", kind)
}

// NetWindow switches the network fault on for d (latency: lat plus or
// minus jitter), then heals, and records the window in the history. It
// returns early, healed, when ctx ends.
func NetWindow(ctx context.Context, h *history.History, p Proxy, kind string, d, lat, jitter time.Duration) error {
	_, err := NetWindowHit(ctx, h, p, kind, d, d, lat, jitter)
	return err
}

// NetWindowHit is NetWindow that, past d, keeps the fault on until it has
// hit some traffic (Proxy.Hits), for at most longest in all: on a loaded
// machine the clients may send nothing through a window of a few tens of
// milliseconds, and a window that hit nothing tested nothing. It says
// whether the fault hit any traffic, so that a caller can say when one
// did not.
func NetWindowHit(ctx context.Context, h *history.History, p Proxy, kind string, d, longest, lat, jitter time.Duration) (hit bool, err error) {
	before := p.Hits()[kind]
	if err := NetOn(p, kind, lat, jitter); err != nil {
		return false, fmt.Errorf("network fault %s: %w", kind, err)
	}
	f := history.Fault{Client: -1, Kind: history.NetFault(kind), Failpoint: "network", Start: h.Now()}
	_ = faults.PauseUntil(ctx, d, longest, 5*time.Millisecond, func() bool { return p.Hits()[kind] != before })
	hit = p.Hits()[kind] != before
	err = p.Heal()
	f.End = h.Now()
	h.AddFault(f)
	if err != nil {
		return hit, fmt.Errorf("healing network fault %s: %w", kind, err)
	}
	return hit, nil
}

// PauseServer freezes the server for d, thaws it, and records the window.
// The thaw happens even when ctx ends first.
func PauseServer(ctx context.Context, h *history.History, s Server, d time.Duration) error {
	f := history.Fault{Client: -1, Kind: history.FaultServerPause, Failpoint: "server", Start: h.Now()}
	if err := s.Pause(ctx); err != nil {
		return err
	}
	_ = faults.Pause(ctx, d)
	err := s.Resume(context.WithoutCancel(ctx))
	f.End = h.Now()
	h.AddFault(f)
	return err
}

// RestartServer kills the server with SIGKILL, starts it again, and
// records the outage: from the kill until the server answers again.
func RestartServer(ctx context.Context, h *history.History, s Server) error {
	f := history.Fault{Client: -1, Kind: history.FaultServerRestart, Failpoint: "server", Start: h.Now()}
	_, err := s.Restart(ctx)
	f.End = h.Now()
	h.AddFault(f)
	return err
}
