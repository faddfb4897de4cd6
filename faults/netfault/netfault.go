// Package netfault puts network faults between a store and its server: an
// in-process toxiproxy proxy (embedded, without its HTTP API server) that
// listens on 127.0.0.1 and forwards to the server, so the store dials the
// proxy instead of the server. The harness switches faults on and off:
// latency with jitter, connection resets, and lost replies (the request
// reaches the server and commits; the reply never comes back, so the caller
// holds an unknown outcome). Every request, reply or connection a fault
// actually hit is counted, by kind.
//
// Between the proxy and the server sits a relay of this package
// (relay.go): toxiproxy dials the server inside its accept loop, one
// connection at a time, and one dial that waits would hold every other.
//
// The faults are toxiproxy's own toxics: latency (downstream), reset_peer
// (upstream, timeout 0) and limit_data (downstream, 0 bytes). A small
// pass-through toxic of this package sits at the head of each direction's
// chain and counts the traffic that meets a fault while it is on.
package netfault

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/rs/zerolog"
)

// The kinds of fault a Proxy injects, as counters and reports name them.
const (
	// KindLatency delays every reply by a latency plus or minus a jitter.
	KindLatency = "latency"
	// KindReset drops each request sent while it is on and tears its
	// connection down: the server never sees the request, the client gets
	// a connection error (an unknown outcome, though nothing happened).
	KindReset = "reset"
	// KindLostReply lets each request through to the server, which runs
	// and commits it, and drops the reply and the connection: the client
	// gets a connection error for a call that took effect.
	KindLostReply = "lost-reply"
)

// Kinds lists the fault kinds in the order reports print them.
var Kinds = []string{KindLatency, KindReset, KindLostReply}

const tapType = "idemcheck_tap"

// streamOf is the direction each kind's toxic acts on.
var streamOf = map[string]string{KindLatency: "downstream", KindReset: "upstream", KindLostReply: "downstream"}

// ErrClosed is returned by a Proxy's methods after Close.
var ErrClosed = errors.New("netfault: proxy closed")

// Proxy is one embedded toxiproxy proxy from 127.0.0.1:<port> to an
// upstream server, with its faults and counters. It is safe for
// concurrent use.
type Proxy struct {
	name     string
	upstream string
	id       string
	px       *toxiproxy.Proxy
	relay    *relay // between px and the upstream: see relay

	mu       sync.Mutex // serialises switching toxics on and off
	closed   bool
	toxics   map[string]string // kind -> name of the toxic that is on
	switches map[string]int    // kind -> times switched on

	// epoch[kind] is 0 while the fault is off, else a number that changes
	// at every switch-on; the taps count each connection once per epoch.
	epoch [3]atomic.Int64
	hits  [3]atomic.Int64
	next  atomic.Int64
	// loseNext is set by LoseNextReply until a reply is lost.
	loseNext atomic.Bool
}

var (
	registry sync.Map // id -> *Proxy, for the taps
	ids      atomic.Int64
)

func init() {
	toxics.Register(tapType, new(tap))
}

// Start starts a proxy named name (for logs and errors) that listens on
// 127.0.0.1 at a free port and forwards every connection to upstream
// (host:port). It injects nothing until a fault is switched on.
func Start(name, upstream string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(upstream); err != nil {
		return nil, fmt.Errorf("netfault: upstream %q is not host:port: %v", upstream, err)
	}
	rl, err := startRelay(upstream)
	if err != nil {
		return nil, fmt.Errorf("netfault: proxy %s cannot listen on 127.0.0.1: %v", name, err)
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	px := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", rl.Addr())
	p := &Proxy{name: name, upstream: upstream, id: strconv.FormatInt(ids.Add(1), 10), px: px, relay: rl,
		toxics: map[string]string{}, switches: map[string]int{}}
	registry.Store(p.id, p)
	if err := px.Start(); err != nil {
		registry.Delete(p.id)
		rl.close()
		return nil, fmt.Errorf("netfault: proxy %s cannot listen on 127.0.0.1: %v", name, err)
	}
	for _, stream := range []string{"upstream", "downstream"} {
		if err := p.add(tapType+"_"+stream, tapType, stream, map[string]any{"proxy": p.id, "stream": stream}); err != nil {
			px.Stop()
			registry.Delete(p.id)
			rl.close()
			return nil, err
		}
	}
	return p, nil
}

// Name is the name the proxy was started with.
func (p *Proxy) Name() string { return p.name }

// Upstream is the server the proxy forwards to.
func (p *Proxy) Upstream() string { return p.upstream }

// Addr is the host:port to dial instead of the upstream server.
func (p *Proxy) Addr() string { return p.px.Listen }

// Latency delays every reply by d plus or minus up to jitter (toxiproxy's
// latency toxic, in whole milliseconds, rounded up) until Heal. Calling it
// again replaces the delay; Latency(0, 0) removes it.
func (p *Proxy) Latency(d, jitter time.Duration) error {
	if d < 0 || jitter < 0 {
		return fmt.Errorf("netfault: latency %v and jitter %v must not be negative", d, jitter)
	}
	if d == 0 && jitter == 0 {
		return p.off(KindLatency)
	}
	return p.on(KindLatency, "latency", map[string]any{"latency": ceilMS(d), "jitter": ceilMS(jitter)})
}

// ResetConnections resets every connection that sends a request until
// Heal: the request is dropped before it reaches the server and the
// connection is torn down (toxiproxy's reset_peer toxic, timeout 0).
func (p *Proxy) ResetConnections() error {
	return p.on(KindReset, "reset_peer", map[string]any{"timeout": 0})
}

// LoseReplies loses every reply until Heal: requests reach the server,
// which runs and commits them, and the reply is dropped and the connection
// closed (toxiproxy's limit_data toxic with 0 bytes, downstream). The
// caller's call fails with a connection error and its outcome is unknown.
// A new connection made while replies are lost fails too (its handshake
// reply is lost).
func (p *Proxy) LoseReplies() error {
	return p.on(KindLostReply, "limit_data", map[string]any{"bytes": 0})
}

// LoseNextReply loses one reply: the next reply to come back through the
// proxy is dropped and its connection closed, exactly as LoseReplies does
// to every reply, and later replies pass. It aims a lost reply at one call
// (on a proxy only that caller uses) without the caller's own reconnect
// and resend meeting the fault too. Heal cancels it if no reply came.
func (p *Proxy) LoseNextReply() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.switches[KindLostReply]++
	p.loseNext.Store(true)
	return nil
}

// Heal switches every fault off. Connections already torn down stay so;
// clients reconnect through the proxy.
func (p *Proxy) Heal() error {
	p.loseNext.Store(false)
	var errs []error
	for _, k := range Kinds {
		errs = append(errs, p.off(k))
	}
	return errors.Join(errs...)
}

// Active lists the faults that are on, in the order of Kinds.
func (p *Proxy) Active() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, k := range Kinds {
		if _, ok := p.toxics[k]; ok || k == KindLostReply && p.loseNext.Load() {
			out = append(out, k)
		}
	}
	return out
}

// Hits counts, by kind, the traffic each fault hit: requests reset,
// replies lost, replies delayed. A reset or a lost reply is counted once
// per connection per switch-on (the connection dies with it); a delayed
// reply is counted per chunk of data read from the server, which is one
// per reply for the short replies of a store. Kinds with no hits are
// absent.
func (p *Proxy) Hits() map[string]int {
	m := map[string]int{}
	for i, k := range Kinds {
		if n := p.hits[i].Load(); n > 0 {
			m[k] = int(n)
		}
	}
	return m
}

// Switches counts, by kind, how many times each fault was switched on.
func (p *Proxy) Switches() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := map[string]int{}
	for k, n := range p.switches {
		m[k] = n
	}
	return m
}

// Close heals, stops listening and closes every connection through the
// proxy. Closing twice is harmless.
func (p *Proxy) Close() error {
	err := p.Heal()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.px.Stop()
	p.relay.close()
	registry.Delete(p.id)
	if errors.Is(err, ErrClosed) {
		err = nil
	}
	return err
}

func kindIndex(kind string) int {
	for i, k := range Kinds {
		if k == kind {
			return i
		}
	}
	panic("netfault: unknown kind " + kind)
}

// on switches a fault on: the toxic first, then the epoch, so the taps
// count only traffic that meets the toxic.
func (p *Proxy) on(kind, typ string, attrs map[string]any) error {
	stream := streamOf[kind]
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if err := p.offLocked(kind); err != nil {
		return err
	}
	name := fmt.Sprintf("%s_%s", kind, stream)
	if err := p.add(name, typ, stream, attrs); err != nil {
		return err
	}
	p.toxics[kind] = name
	p.switches[kind]++
	p.epoch[kindIndex(kind)].Store(p.next.Add(1))
	return nil
}

func (p *Proxy) off(kind string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	return p.offLocked(kind)
}

// offLocked switches a fault off: the epoch first, then the toxic.
func (p *Proxy) offLocked(kind string) error {
	name, ok := p.toxics[kind]
	if !ok {
		return nil
	}
	p.epoch[kindIndex(kind)].Store(0)
	delete(p.toxics, kind)
	if err := p.px.Toxics.RemoveToxic(context.Background(), name); err != nil {
		return fmt.Errorf("netfault: proxy %s: removing %s: %v", p.name, kind, err)
	}
	return nil
}

// add adds a toxic through toxiproxy's own JSON decoding, the one public
// way in: it validates the type, the stream and the attributes.
func (p *Proxy) add(name, typ, stream string, attrs map[string]any) error {
	body, err := json.Marshal(map[string]any{"name": name, "type": typ, "stream": stream, "toxicity": 1.0, "attributes": attrs})
	if err != nil {
		return err
	}
	if _, err := p.px.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
		return fmt.Errorf("netfault: proxy %s: adding %s toxic: %v", p.name, typ, err)
	}
	return nil
}

func ceilMS(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// tap is a pass-through toxic that counts the traffic meeting a fault:
// upstream it counts requests reset, downstream replies lost and delayed.
type tap struct {
	Proxy  string `json:"proxy"`
	Stream string `json:"stream"` // the direction it sits in
}

// tapState is one connection's memory of the epochs it was counted in.
type tapState struct {
	seen [3]int64
}

// NewState gives each connection (and direction) its own memory.
func (t *tap) NewState() interface{} { return new(tapState) }

// Pipe passes every chunk on unchanged, counting it first.
func (t *tap) Pipe(stub *toxics.ToxicStub) {
	var p *Proxy
	if v, ok := registry.Load(t.Proxy); ok {
		p = v.(*Proxy)
	}
	st, _ := stub.State.(*tapState)
	if st == nil {
		st = new(tapState)
	}
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if p != nil && t.Stream == streamOf[KindLostReply] && p.loseNext.CompareAndSwap(true, false) {
				p.hits[kindIndex(KindLostReply)].Add(1)
				stub.Close() // drop the reply and the connection, as limit_data does
				return
			}
			if p != nil {
				p.count(t.Stream, st)
			}
			stub.Output <- c
		}
	}
}

// count records the faults a chunk is about to meet in its direction:
// resets act on requests (upstream), lost replies and latency on replies.
func (p *Proxy) count(stream string, st *tapState) {
	for i, k := range Kinds {
		if streamOf[k] != stream {
			continue
		}
		e := p.epoch[i].Load()
		if e == 0 {
			continue
		}
		if k == KindLatency {
			p.hits[i].Add(1)
			continue
		}
		if st.seen[i] != e {
			st.seen[i] = e
			p.hits[i].Add(1)
		}
	}
}
