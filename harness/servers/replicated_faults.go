package servers

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/idemcheck/idemcheck/harness/nemesis"
)

// Ready returns once a standby streams from the primary: after a
// failover it removes the fenced primary and starts a new standby. A
// standby whose wait for streaming was cut short (a timeout beside a
// loaded machine, an interrupted round) is waited for again, and
// replaced if it still does not stream: Ready once took such a standby
// as it was, and with no synchronous standby in force on the new primary
// the next round's failover lost claims the correct store had
// acknowledged (a false alarm in the demo test).
func (t *Topology) Ready(ctx context.Context) error {
	if err := t.Heal(ctx); err != nil {
		return err
	}
	t.mu.Lock()
	old := t.old
	t.old = nil
	p, sb := t.primary, t.standby
	synced := sb != nil && sb.synced
	t.mu.Unlock()
	for _, nd := range old {
		nd.flt.Close()
		_ = nd.srv.Close(ctx)
	}
	if synced {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, topologyReadyTimeout)
	defer cancel()
	if sb != nil {
		if err := t.syncStandby(rctx, p, sb); err != nil {
			t.dropStandby(ctx, sb) // the next Ready starts another
			return fmt.Errorf("%s standby %s, started before, does not stream: %w", t.Servers, sb.name, err)
		}
		return nil
	}
	return t.addStandby(rctx)
}

// LagStandby cuts the standby off the replication network (docker
// network disconnect): it falls behind while the primary keeps serving.
// Freezing its container would not do: the kernel would still take the
// primary's stream into the frozen process's socket buffers.
func (t *Topology) LagStandby(ctx context.Context) error {
	t.mu.Lock()
	sb := t.standby
	t.mu.Unlock()
	if sb == nil {
		return errors.New("no standby to cut off")
	}
	if _, err := docker(ctx, "network disconnect", func(ctx context.Context) (client.NetworkDisconnectResult, error) {
		return t.cli.NetworkDisconnect(ctx, t.replNet, client.NetworkDisconnectOptions{Container: sb.srv.ctr.GetContainerID(), Force: true})
	}); err != nil {
		return fmt.Errorf("cut %s standby %s off %s: %w", t.Servers, sb.name, t.replNet, err)
	}
	t.mu.Lock()
	sb.lagging = true
	t.mu.Unlock()
	return nil
}

// CatchUpStandby reconnects a lagging standby to the replication network.
func (t *Topology) CatchUpStandby(ctx context.Context) error {
	t.mu.Lock()
	sb := t.standby
	t.mu.Unlock()
	if sb == nil || !sb.lagging {
		return nil
	}
	ep := &network.EndpointSettings{Aliases: []string{sb.name}}
	if _, err := docker(ctx, "network connect", func(ctx context.Context) (client.NetworkConnectResult, error) {
		return t.cli.NetworkConnect(ctx, t.replNet, client.NetworkConnectOptions{Container: sb.srv.ctr.GetContainerID(), EndpointConfig: ep})
	}); err != nil {
		return fmt.Errorf("reconnect %s standby %s to %s: %w", t.Servers, sb.name, t.replNet, err)
	}
	t.mu.Lock()
	sb.lagging = false
	t.mu.Unlock()
	return nil
}

// PausePrimary freezes the primary's container.
func (t *Topology) PausePrimary(ctx context.Context) error {
	t.mu.Lock()
	p := t.primary
	t.mu.Unlock()
	return p.flt.Pause(ctx)
}

// Partition disconnects the primary from the replication network
// (nemesis.FromStandby), the clients' network (FromClients) or both.
func (t *Topology) Partition(ctx context.Context, from string) error {
	var nets []string
	switch from {
	case nemesis.FromStandby:
		nets = []string{t.replNet}
	case nemesis.FromClients:
		nets = []string{t.cliNet}
	case nemesis.FromBoth:
		nets = []string{t.replNet, t.cliNet}
	default:
		return fmt.Errorf("partition: unknown side %q", from)
	}
	t.mu.Lock()
	p := t.primary
	t.mu.Unlock()
	for _, n := range nets {
		t.mu.Lock()
		done := t.cut[n]
		t.mu.Unlock()
		if done {
			continue
		}
		if _, err := docker(ctx, "network disconnect", func(ctx context.Context) (client.NetworkDisconnectResult, error) {
			return t.cli.NetworkDisconnect(ctx, n, client.NetworkDisconnectOptions{Container: p.srv.ctr.GetContainerID(), Force: true})
		}); err != nil {
			return fmt.Errorf("partition %s node %s from %s: %w", t.Servers, p.name, n, err)
		}
		t.mu.Lock()
		t.cut[n] = true
		t.mu.Unlock()
	}
	return nil
}

// Heal reconnects the primary to the networks Partition cut it from (a
// fenced primary stays down) and a lagging standby, thaws the primary, and
// routes the clients to the primary again (its address may have changed).
func (t *Topology) Heal(ctx context.Context) error {
	t.mu.Lock()
	p, sb := t.primary, t.standby
	cut := t.cut
	t.cut = map[string]bool{}
	t.mu.Unlock()
	var errs []error
	for n := range cut {
		ep := &network.EndpointSettings{}
		if n == t.replNet {
			ep.Aliases = []string{p.name}
		}
		if _, err := docker(ctx, "network connect", func(ctx context.Context) (client.NetworkConnectResult, error) {
			return t.cli.NetworkConnect(ctx, n, client.NetworkConnectOptions{Container: p.srv.ctr.GetContainerID(), EndpointConfig: ep})
		}); err != nil {
			errs = append(errs, fmt.Errorf("reconnect %s node %s to %s: %w", t.Servers, p.name, n, err))
		}
	}
	if sb != nil {
		errs = append(errs, t.CatchUpStandby(ctx))
	}
	if len(cut) > 0 {
		// Reconnected, the primary may have another address.
		if err := t.refreshIP(ctx, p); err != nil {
			errs = append(errs, err)
		} else if target := net.JoinHostPort(p.ip, t.port()); target != t.router.Target() {
			t.router.Route(target)
		}
	}
	if err := p.flt.Heal(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Failover fences the primary with SIGKILL, promotes the standby
// (reconnected first if it lagged) and routes the clients to it. The
// standby's data is what it had received: with asynchronous replication,
// less than the primary acknowledged. It refuses a standby that Ready has
// not seen stream: promoting it would lose what a synchronous store
// acknowledged, and the correct store would fail.
func (t *Topology) Failover(ctx context.Context) error {
	t.mu.Lock()
	p, sb := t.primary, t.standby
	synced := sb != nil && sb.synced
	t.mu.Unlock()
	if sb == nil {
		return errors.New("failover: no standby")
	}
	if !synced {
		return fmt.Errorf("failover: standby %s is not known to stream yet (Ready has not finished it)", sb.name)
	}
	if err := p.flt.Kill(ctx); err != nil {
		return fmt.Errorf("failover: fencing %s: %w", p.name, err)
	}
	if err := t.CatchUpStandby(ctx); err != nil { // the fenced primary sends nothing more
		return err
	}
	// From here on the standby is the primary, promoted or not: the
	// fenced one is never waited for again (Heal, an interrupted run).
	t.mu.Lock()
	t.old = append(t.old, p)
	t.primary, t.standby = sb, nil
	t.cut = map[string]bool{} // the fenced primary is not reconnected
	t.mu.Unlock()
	if err := waitUntil(ctx, func(ctx context.Context) error {
		return kinds[t.Servers].promote(ctx, sb.srv.Addr)
	}); err != nil {
		return fmt.Errorf("failover: promoting %s: %w", sb.name, err)
	}
	t.router.Route(net.JoinHostPort(sb.ip, t.port()))
	return nil
}
