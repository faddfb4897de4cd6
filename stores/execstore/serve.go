package execstore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
)

// Serve is the store's side of the protocol for a Go store, as the Python
// and JavaScript client libraries are for theirs: it writes h as its
// hello, opens the store with open when asked, and answers every request
// in a goroutine of its own (so answers go out in any order). The store's
// failpoints (faults.Hit) become hit messages, answered by go, and its
// faults.Trace calls trace messages when the request asks for them. It
// returns after a close request, or when in ends. A claim's fencing
// number is its Decision.Fence, or else fence's number for its token
// (fence may be nil; see stores.FenceOf); with a hello that declares
// fence, a claim without one is answered with an error. A claim's
// Decision.LeaseUntil goes out as its lease_until_ms.
func Serve(ctx context.Context, in io.Reader, out io.Writer, h Hello, fence stores.Fence, open func(ctx context.Context, cfg stores.Config, addr string) (stores.Store, error)) error {
	h.Type, h.Protocol = "hello", Version
	s := &server{out: &batchWriter{w: out}, gos: map[int64]chan struct{}{}}
	if err := s.send(h); err != nil {
		return err
	}
	r := bufio.NewReaderSize(in, 64<<10)
	var st stores.Store
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		line, err := readLine(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		var m toStore
		if err := strict(line, &m); err != nil {
			return fmt.Errorf("serve: %w: %s: %v", ErrProtocol, quoteLine(line), err)
		}
		switch m.Type {
		case "go":
			s.mu.Lock()
			ch := s.gos[m.ID]
			delete(s.gos, m.ID)
			s.mu.Unlock()
			if ch != nil {
				close(ch)
			}
			continue
		case "open":
			if m.Open == nil {
				return fmt.Errorf("serve: open without a config")
			}
			cfg := stores.Config{LockTTL: fromDurMs(m.Open.LockTTLMs), Retention: fromDurMs(m.Open.RetentionMs), Variant: m.Open.Variant, Namespace: m.Open.Namespace}
			st, err = open(ctx, cfg, m.Open.Addr)
			s.reply(m.ID, nil, err)
			continue
		case "close":
			wg.Wait()
			if st != nil {
				err = st.Close()
			}
			s.reply(m.ID, nil, err)
			return nil
		}
		if st == nil {
			s.reply(m.ID, nil, errors.New("not open"))
			continue
		}
		wg.Add(1)
		go func(m toStore) {
			defer wg.Done()
			s.handle(ctx, st, h, fence, m)
		}(m)
	}
}

type server struct {
	out *batchWriter
	mu  sync.Mutex
	gos map[int64]chan struct{}
}

func (s *server) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.out.write(append(b, '\n'))
}

// reply answers request id: ok with the fields of ok set (nil: none), or
// the error with its code.
func (s *server) reply(id int64, ok *fromStore, err error) {
	m := fromStore{Type: "ok"}
	if ok != nil {
		m = *ok
		m.Type = "ok"
	}
	if err != nil {
		code := CodeOther
		switch {
		case errors.Is(err, stores.ErrFenced):
			code = CodeFenced
		case errors.Is(err, stores.ErrInvalidKey):
			code = CodeInvalidKey
		case errors.Is(err, stores.ErrNotApplied):
			code = CodeNotApplied
		case errors.Is(err, stores.ErrLost):
			code = CodeLost
		}
		m = fromStore{Type: "error", Code: code, Message: err.Error()}
	}
	m.ID = &id
	_ = s.send(m)
}

// serveHooks turns one request's failpoints into hit messages and its
// trace into trace messages.
type serveHooks struct {
	s  *server
	id int64
}

// Hit sends a hit and waits for idemcheck's go.
func (k serveHooks) Hit(ctx context.Context, name string) error {
	ch := make(chan struct{})
	k.s.mu.Lock()
	k.s.gos[k.id] = ch
	k.s.mu.Unlock()
	if err := k.s.send(fromStore{Type: "hit", ID: &k.id, Point: name}); err != nil {
		return err
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Trace sends a trace message.
func (k serveHooks) Trace(_ context.Context, stmt, result string) {
	_ = k.s.send(fromStore{Type: "trace", ID: &k.id, Step: stmt, Result: result})
}

func (s *server) handle(ctx context.Context, st stores.Store, h Hello, fence stores.Fence, m toStore) {
	hooks := serveHooks{s: s, id: m.ID}
	if len(h.Points) > 0 {
		ctx = faults.WithHandler(ctx, hooks)
	}
	if m.Trace {
		ctx = faults.WithTracer(ctx, hooks)
	}
	var now time.Time
	if m.NowMs != nil {
		now = fromMs(*m.NowMs)
	}
	needKey := func() bool {
		if m.Key == nil {
			s.reply(m.ID, nil, fmt.Errorf("%s without a key", m.Type))
			return false
		}
		return true
	}
	switch m.Type {
	case "begin":
		if m.Request == nil {
			s.reply(m.ID, nil, errors.New("begin without a request"))
			return
		}
		req := stores.Request{KeyRef: m.Request.Key, Fingerprint: m.Request.Fingerprint, Now: fromMs(m.Request.NowMs), Lease: fromDurMs(m.Request.LeaseMs)}
		d, err := st.Begin(ctx, req)
		if err != nil {
			s.reply(m.ID, nil, err)
			return
		}
		wd := wireDecision{Outcome: d.Outcome.String(), Token: string(d.Token), Takeover: d.Takeover}
		if !d.DecidedAt.IsZero() {
			v := ms(d.DecidedAt)
			wd.DecidedAtMs = &v
		}
		if d.Outcome == stores.Replay {
			wd.Response = &d.Response
		}
		if d.Outcome == stores.Claimed {
			n, ok := stores.FenceOf(fence, d)
			if !ok && h.Fence {
				s.reply(m.ID, nil, fmt.Errorf("begin: the claim with token %q carries no fencing number", d.Token))
				return
			}
			if ok {
				wd.Fence = &n
			}
			if !d.LeaseUntil.IsZero() {
				v := ms(d.LeaseUntil)
				wd.LeaseUntilMs = &v
			}
		}
		if b, ok := appendDecision(make([]byte, 0, 160), m.ID, &wd); ok {
			_ = s.out.write(append(b, '\n'))
			return
		}
		s.reply(m.ID, &fromStore{Decision: &wd}, nil)
	case "complete":
		if needKey() {
			var resp stores.Response
			if m.Response != nil {
				resp = *m.Response
			}
			s.reply(m.ID, nil, st.Complete(ctx, *m.Key, stores.Token(deref(m.Token)), resp))
		}
	case "release":
		if needKey() {
			s.reply(m.ID, nil, st.Release(ctx, *m.Key, stores.Token(deref(m.Token))))
		}
	case "extend":
		e, ok := st.(stores.Extender)
		if !ok {
			s.reply(m.ID, nil, errors.New("extend: not supported"))
		} else if needKey() {
			s.reply(m.ID, nil, e.Extend(ctx, *m.Key, stores.Token(deref(m.Token)), now))
		}
	case "prune":
		n, err := st.Prune(ctx, now)
		s.reply(m.ID, &fromStore{Removed: &n}, err)
	case "show":
		rs, ok := st.(stores.RowShower)
		if !ok {
			s.reply(m.ID, nil, errors.New("show: not supported"))
		} else if needKey() {
			row, err := rs.ShowRow(ctx, *m.Key)
			s.reply(m.ID, &fromStore{Row: &row}, err)
		}
	default:
		s.reply(m.ID, nil, fmt.Errorf("unknown request type %q", m.Type))
	}
}

// deref is the token a request carried, "" when it carried none.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
