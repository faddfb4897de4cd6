// Package lab re-runs the lab of the lesson card (Lesson 4, "Lab numbers"):
// 100 orders, a lossy network between client and server, client retries,
// for three versions of the client — no key, a new key per attempt, the
// same key on every retry — counting the charges the payment provider made
// and the orders it charged more than once.
//
// The server is a real HTTP API on 127.0.0.1: POST /charges runs
// stores.Run on the store (the idempotency key from the Idempotency-Key
// header, scoped to the version's tenant) and its work charges the
// provider, passing charge:<key> downstream (no key, no downstream key).
// The client reaches it through an embedded toxiproxy (faults/netfault)
// with a fresh connection per attempt. The loss is reproducible from the
// seed: before each attempt the lab draws, from a PRNG seeded by (seed,
// order), whether this attempt's reply is lost; if so the proxy loses
// replies for exactly that request. The request reaches the server and its
// handler runs to the end (Go's server writes the reply after the handler
// returns); the reply is dropped and the connection closed, so the client
// sees an error and retries. Requests go one at a time, as in the card's
// single synchronous process, so the draws do not depend on timing, and
// every version meets the same losses: no-key and key-per-try print the
// same figures, as on the card.
//
// Only replies are lost, never requests: a lost request changes nothing
// the table counts. The card's figures imply the rate: 24 of 100 orders
// double-charged and 32 extra charges on them are what a per-attempt loss
// probability of 1/4 gives on average (p per order, p/(1-p) extra charges
// per order), so LossRate defaults to 0.25.
package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults/netfault"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/stores"
)

// The three versions of the client, in the card's order.
const (
	NoKey     = "no-key"      // no idempotency key: every retry charges again
	KeyPerTry = "key-per-try" // a new key per attempt: every retry is a new operation
	SameKey   = "same-key"    // one key per order, on every retry: the rule
)

// Versions lists the versions in the order the table prints them.
var Versions = []string{NoKey, KeyPerTry, SameKey}

// Figures are one row of the card's table.
type Figures struct {
	Charges       int `json:"charges"`
	DoubleCharged int `json:"double_charged"`
}

// The card's run: its seed and orders per version. Its figures compare
// only with a run of the same seed and orders.
const (
	CardSeed   = 1
	CardOrders = 100
)

// Card is the card's published table (`npm run l4`, seed 1, 100 orders).
var Card = map[string]Figures{
	NoKey:     {Charges: 132, DoubleCharged: 24},
	KeyPerTry: {Charges: 132, DoubleCharged: 24},
	SameKey:   {Charges: 100, DoubleCharged: 0},
}

// Options configure one lab run.
type Options struct {
	// Backend and Addr say which store the server uses: a directory for
	// SQLite (the lab makes its own file there), a DSN for Postgres,
	// host:port for Redis; memory ignores Addr.
	Backend stores.Backend
	Addr    string
	Seed    int64
	Orders  int
	// LossRate is the probability that an attempt's reply is lost
	// (default 0.25, see the package doc).
	LossRate float64
	// MaxAttempts bounds a client's attempts per order (default 10).
	MaxAttempts int
}

// VersionResult is one row of the lab's table, with what it took.
type VersionResult struct {
	Name          string `json:"name"`
	Charges       int    `json:"charges"`        // effective charges at the provider
	DoubleCharged int    `json:"double_charged"` // orders charged more than once
	Requests      int    `json:"requests"`       // requests the server handled
	LostReplies   int    `json:"lost_replies"`   // replies the network lost
	Unanswered    int    `json:"unanswered,omitempty"`
	// LinkGaveUp counts the unanswered orders (among Unanswered) whose
	// every attempt's reply the link lost or no answer came to: the
	// client gave up at MaxAttempts (one order in a million at the
	// default loss), defeated by the link, not by the store.
	LinkGaveUp int `json:"link_gave_up,omitempty"`
	// NoAnswer counts the attempts that got no answer on a healthy link
	// (the machine, not the link: a loaded one drops a connection): each
	// is retried as a lost reply is, its outcome unknown.
	NoAnswer int `json:"no_answer,omitempty"`
}

// Result is one seed's table.
type Result struct {
	Seed     int64           `json:"seed"`
	Orders   int             `json:"orders"`
	Versions []VersionResult `json:"versions"`
}

// Version returns the named row.
func (r *Result) Version(name string) VersionResult {
	for _, v := range r.Versions {
		if v.Name == name {
			return v
		}
	}
	return VersionResult{Name: name}
}

// Errors of Shape.
var (
	// ErrShape: the table does not have the card's shape; a bug.
	ErrShape = errors.New("the table does not have the card's shape")
	// ErrNoLoss: no reply was lost, so the table cannot show anything
	// (too few orders for the loss rate); neither pass nor fail.
	ErrNoLoss = errors.New("no reply was lost: nothing to show (use more orders)")
)

// Shape checks the card's shape: no-key and key-per-try charge more than
// one charge per order and double-charge some orders; same-key charges
// each order exactly once. It returns nil, an error wrapping ErrShape that
// says what broke, or ErrNoLoss.
func (r *Result) Shape() error {
	lost := 0
	for _, v := range r.Versions {
		lost += v.LostReplies
	}
	var errs []error
	for _, name := range []string{NoKey, KeyPerTry} {
		v := r.Version(name)
		if lost > 0 && (v.Charges <= r.Orders || v.DoubleCharged == 0) {
			errs = append(errs, fmt.Errorf("%s charged %d times for %d orders, %d double-charged: want more charges than orders and some double-charged", name, v.Charges, r.Orders, v.DoubleCharged))
		}
	}
	// An order whose every reply the link lost still got its one charge
	// (the store charged it once, and replayed the rest): the lesson
	// holds. An order left unanswered otherwise (refused in flight to the
	// end) breaks the shape.
	if v := r.Version(SameKey); v.Charges != r.Orders || v.DoubleCharged != 0 || v.Unanswered != v.LinkGaveUp {
		errs = append(errs, fmt.Errorf("same-key charged %d times for %d orders, %d double-charged, %d unanswered (%d of them when the link lost every reply): want exactly one charge per order, each answered",
			v.Charges, r.Orders, v.DoubleCharged, v.Unanswered, v.LinkGaveUp))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: seed %d: %w", ErrShape, r.Seed, errors.Join(errs...))
	}
	if lost == 0 {
		return ErrNoLoss
	}
	return nil
}

func (o *Options) defaults() error {
	if o.LossRate == 0 {
		o.LossRate = 0.25
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 10
	}
	switch {
	case o.Orders < 1:
		return fmt.Errorf("--orders must be at least 1, got %d", o.Orders)
	case o.LossRate < 0 || o.LossRate >= 1:
		return fmt.Errorf("loss rate must be in [0, 1), got %v", o.LossRate)
	case o.Backend.Open == nil:
		return errors.New("lab: no store backend")
	}
	return nil
}

// Run runs the three versions one after another on one store (each
// version its own tenant) behind one API server and one lossy link, and
// returns the table. An error means the lab could not be set up or its
// network misbehaved; the table's shape is for Shape to judge.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	runID := time.Now().UnixNano()
	addr := o.Addr
	if o.Backend.Lives == stores.File {
		addr = filepath.Join(o.Addr, fmt.Sprintf("lab-%d-%d.db", o.Seed, runID))
	}
	st, err := o.Backend.Open(ctx, addr, stores.Config{LockTTL: 30 * time.Second, Retention: time.Hour,
		Variant: stores.Correct, Namespace: fmt.Sprintf("lab_%s_%d", strings.Replace(fmt.Sprint(o.Seed), "-", "m", 1), runID%1_000_000_000)}) // a negative seed's "-" is no namespace letter
	if err != nil {
		return nil, fmt.Errorf("open %s store: %w", o.Backend.Name, err)
	}
	defer st.Close()

	api := &server{store: st}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("lab: API server cannot listen on 127.0.0.1: %v", err)
	}
	hs := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()
	link, err := netfault.Start("lab", ln.Addr().String())
	if err != nil {
		return nil, err
	}
	defer link.Close()

	res := &Result{Seed: o.Seed, Orders: o.Orders}
	for _, v := range Versions {
		api.reset(v)
		vr, err := runVersion(ctx, o, v, link)
		if err != nil {
			return nil, err
		}
		vr.Requests = api.handled()
		for _, n := range api.ledger.EffectiveByOrder() {
			vr.Charges += n
			if n > 1 {
				vr.DoubleCharged++
			}
		}
		res.Versions = append(res.Versions, vr)
	}
	return res, nil
}

// runVersion sends every order, with retries, as the version's client does.
func runVersion(ctx context.Context, o Options, version string, link *netfault.Proxy) (VersionResult, error) {
	vr := VersionResult{Name: version}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		// One connection per attempt: a lost reply kills its connection,
		// and Go's transport never resends a request on a fresh one.
		DisableKeepAlives: true,
	}}
	defer client.CloseIdleConnections()
	url := "http://" + link.Addr() + "/charges"
	for i := 0; i < o.Orders; i++ {
		id := fmt.Sprintf("o%03d", i+1)
		loss := rand.New(rand.NewSource(o.Seed*1_000_003 + int64(i)))
		answered, linkOnly := false, true // linkOnly: no attempt got an answer
		for attempt := 1; attempt <= o.MaxAttempts && !answered; attempt++ {
			if err := ctx.Err(); err != nil {
				return vr, err
			}
			key := ""
			switch version {
			case KeyPerTry:
				key = fmt.Sprintf("order-%s-try%d", id, attempt)
			case SameKey:
				key = "order-" + id
			}
			lost := loss.Float64() < o.LossRate
			if lost {
				if err := link.LoseReplies(); err != nil {
					return vr, err
				}
			}
			status, err := post(ctx, client, url, version, key, id, 1000+7*i)
			if lost {
				if herr := link.Heal(); herr != nil {
					return vr, herr
				}
				if err == nil {
					return vr, fmt.Errorf("lab: the link was to lose the reply of %s attempt %d, but the client got %d", id, attempt, status)
				}
				vr.LostReplies++
				continue // an unknown outcome: retry
			}
			switch {
			case err != nil && ctx.Err() != nil:
				return vr, ctx.Err()
			case err != nil:
				// No answer on a healthy link: an unknown outcome all
				// the same, retried as the version's client retries one
				// (before, the lab stopped, exit 2, its seeds lost).
				vr.NoAnswer++
				continue
			case status == http.StatusCreated:
				answered = true
			case status == http.StatusConflict:
				linkOnly = false
				time.Sleep(10 * time.Millisecond) // in flight: retry later, same key
			default:
				return vr, fmt.Errorf("lab: %s attempt %d: the API answered %d", id, attempt, status)
			}
		}
		if !answered {
			vr.Unanswered++
			if linkOnly {
				vr.LinkGaveUp++
			}
		}
	}
	return vr, nil
}

type chargeRequest struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

func post(ctx context.Context, c *http.Client, url, tenant, key, order string, amount int) (int, error) {
	body, _ := json.Marshal(chargeRequest{Order: order, Amount: amount})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant", tenant)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// server is the lab's HTTP API: POST /charges charges an order once per
// idempotency key (stores.Run), or every time without one.
type server struct {
	store   stores.Store
	mu      sync.Mutex
	ledger  *history.Ledger
	version string
	count   int
}

func (s *server) reset(version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger, s.version, s.count = history.NewLedger(), version, 0
}

func (s *server) handled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// ServeHTTP handles POST /charges.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/charges" {
		http.Error(w, "POST /charges only", http.StatusNotFound)
		return
	}
	var cr chargeRequest
	if err := json.NewDecoder(r.Body).Decode(&cr); err != nil || cr.Order == "" {
		http.Error(w, "body must be {\"order\": \"…\", \"amount\": …}", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.count++
	ledger := s.ledger
	s.mu.Unlock()
	key := r.Header.Get("Idempotency-Key")
	charge := func(downstream string) stores.Response {
		id := ledger.Charge(cr.Order, downstream, 0, 0)
		return stores.Response{Status: http.StatusCreated, Body: fmt.Sprintf(`{"charge":%q,"order":%q,"amount":%d}`, id, cr.Order, cr.Amount)}
	}
	var resp stores.Response
	if key == "" {
		resp = charge("")
	} else {
		req := stores.Request{KeyRef: stores.KeyRef{Tenant: "lab-" + r.Header.Get("X-Tenant"), Key: key},
			Fingerprint: fmt.Sprintf("order=%s&amount=%d", cr.Order, cr.Amount), Now: time.Now()}
		res, err := stores.Run(r.Context(), s.store, req, stores.ReleaseOnError,
			func(context.Context, stores.Token) (stores.Response, error) { return charge("charge:" + key), nil })
		if err != nil {
			http.Error(w, err.Error(), stores.HTTPStatus(err))
			return
		}
		resp = res.Response
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.Status)
	io.WriteString(w, resp.Body)
}
