// Command httpsvc is the example service of idemcheck's black-box mode
// (idemcheck http): a tiny payment API, POST /orders with a JSON body
// {"order": "...", "amount": N} and an Idempotency-Key header, whose
// handler charges the order once at a payment provider. Its idempotency
// is middleware in front of the handler, and the -variant flag chooses
// which middleware:
//
//   - correct: stores.Run over the shared Redis (the key claimed
//     atomically, the request fingerprinted, the provider's error saved
//     and replayed, since the charge may have gone through);
//   - lock-in-process: a mutex per key in this process in front of a
//     response cache shared in Redis: two instances both miss the cache
//     and both charge;
//   - no-fingerprint: stores.Run with every request's fingerprint alike:
//     a key reused with another body gets the old answer, not 422;
//   - memory-map: stores.Run over a map in this process: another instance,
//     or this one restarted, does not know the key and charges again;
//   - release-on-error: stores.Run releasing the claim on every error,
//     even the provider's timeout after the charge went through: the retry
//     charges again;
//   - downstream-key: release-on-error, correct this time: the charge
//     carries the request's key to the provider (Idempotency-Key, the key
//     at every hop), which answers a repeated key with the charge it made;
//   - fresh-downstream-key: the same, but with a new downstream key on
//     every attempt: the provider cannot tell a retry from a new charge.
//
// The environment gives it PORT, IDEM_PROVIDER_URL (where to charge) and
// IDEM_STORE_ADDR (the shared Redis, host:port); IDEM_NAMESPACE keeps its
// keys apart from other runs on the same Redis.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
	"github.com/idemcheck/idemcheck/stores/redis"
)

// The variants, as -variant names them.
var variants = []string{"correct", "lock-in-process", "no-fingerprint", "memory-map", "release-on-error", "downstream-key", "fresh-downstream-key"}

func main() {
	variant := flag.String("variant", "correct", fmt.Sprint("middleware: ", variants))
	lockTTL := flag.Duration("lock-ttl", 5*time.Second, "a claim older than this is stale: it must outlast the charge's deadline (-charge-timeout)")
	chargeTimeout := flag.Duration("charge-timeout", 2*time.Second, "deadline of the whole charge, provider call included")
	flag.Parse()
	port, provider, addr := os.Getenv("PORT"), os.Getenv("IDEM_PROVIDER_URL"), os.Getenv("IDEM_STORE_ADDR")
	if port == "" || provider == "" {
		log.Fatal("httpsvc: PORT and IDEM_PROVIDER_URL must be set")
	}
	ns := os.Getenv("IDEM_NAMESPACE")
	if ns == "" {
		ns = "httpsvc"
	}
	ctx := context.Background()
	cfg := stores.Config{LockTTL: *lockTTL, Retention: time.Hour, Variant: stores.Correct, Namespace: ns}
	if *chargeTimeout >= *lockTTL {
		log.Fatalf("httpsvc: -charge-timeout %v must be shorter than -lock-ttl %v, or a slow charge is taken over and runs twice", *chargeTimeout, *lockTTL)
	}
	svc := &service{provider: provider, http: &http.Client{}, chargeTimeout: *chargeTimeout, policy: stores.SaveError}
	var err error
	switch *variant {
	case "correct", "no-fingerprint", "release-on-error", "downstream-key", "fresh-downstream-key":
		svc.store, err = redis.New(ctx, addr, cfg)
		svc.noFingerprint = *variant == "no-fingerprint"
		if *variant != "correct" && *variant != "no-fingerprint" {
			svc.policy = stores.ReleaseOnError
		}
		svc.downstream = strings.TrimSuffix(*variant, "-downstream-key")
	case "memory-map":
		svc.store, err = memory.New(cfg)
	case "lock-in-process":
		svc.cache = goredis.NewClient(&goredis.Options{Addr: addr})
		svc.ns = ns
		err = svc.cache.Ping(ctx).Err()
	default:
		err = fmt.Errorf("unknown variant %q (known: %v)", *variant, variants)
	}
	if err != nil {
		log.Fatalf("httpsvc: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", svc.orders)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "httpsvc: POST /orders") })
	log.Printf("httpsvc %s on 127.0.0.1:%s", *variant, port)
	log.Fatal(http.ListenAndServe("127.0.0.1:"+port, mux))
}

type service struct {
	provider      string
	chargeTimeout time.Duration
	http          *http.Client
	store         stores.Store
	policy        stores.ErrorPolicy
	noFingerprint bool
	// downstream says which key the charge carries to the provider:
	// "downstream-key" the request's own, "fresh" a new one per attempt,
	// anything else none.
	downstream string

	// lock-in-process only: the per-key locks of this process, and the
	// shared response cache.
	locks sync.Map // key -> *sync.Mutex
	cache *goredis.Client
	ns    string
}

// order is the body of POST /orders.
type order struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

func (s *service) orders(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	var o order
	if err == nil {
		err = json.Unmarshal(body, &o)
	}
	if err != nil || o.Order == "" {
		http.Error(w, `want a JSON body {"order": "...", "amount": N}`, http.StatusBadRequest)
		return
	}
	sum := sha256.Sum256(append([]byte("POST /orders\n"), body...))
	fp := hex.EncodeToString(sum[:])
	// The charge runs to its end even if the client goes away: it is the
	// effect the key guards.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	if s.cache != nil {
		s.lockInProcess(ctx, w, key, fp, o)
		return
	}
	if s.noFingerprint {
		fp = "-" // the bug: every request of a key looks alike
	}
	req := stores.Request{KeyRef: stores.KeyRef{Tenant: "orders", Key: key}, Fingerprint: fp, Now: time.Now()}
	res, err := stores.Run(ctx, s.store, req, s.policy, func(ctx context.Context, _ stores.Token) (stores.Response, error) {
		return s.charge(ctx, o, s.downstreamKey(key))
	})
	if err != nil {
		http.Error(w, err.Error(), stores.HTTPStatus(err))
		return
	}
	reply(w, res.Response)
}

// charge calls the provider once: one effect. Its deadline is shorter
// than the lock's TTL, so that no honest charge outlives its claim.
func (s *service) charge(ctx context.Context, o order, downstream string) (stores.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, s.chargeTimeout)
	defer cancel()
	b, _ := json.Marshal(o)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.provider, bytes.NewReader(b))
	if err != nil {
		return stores.Response{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if downstream != "" {
		req.Header.Set("Idempotency-Key", downstream)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return stores.Response{}, fmt.Errorf("provider: %w", err)
	}
	defer resp.Body.Close()
	var c struct {
		Charge string `json:"charge"`
	}
	if resp.StatusCode != http.StatusOK {
		return stores.Response{}, fmt.Errorf("provider answered %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || c.Charge == "" {
		return stores.Response{}, errors.New("provider: no charge id in its answer")
	}
	out, _ := json.Marshal(map[string]any{"order": o.Order, "amount": o.Amount, "charge": c.Charge})
	return stores.Response{Status: http.StatusOK, Body: string(out)}, nil
}

// downstreamKey is the key a charge of the request keyed key carries to
// the provider ("" for none).
func (s *service) downstreamKey(key string) string {
	switch s.downstream {
	case "downstream-key":
		return "orders:" + key
	case "fresh":
		var b [16]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}
	return ""
}

func reply(w http.ResponseWriter, r stores.Response) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(r.Status)
	io.WriteString(w, r.Body)
}

// lockInProcess is the mutant middleware: a lock per key held in this
// process only, in front of a response cache that every instance shares.
// Everything else is right (key validation, fingerprint, saving errors);
// the lock is the bug.
func (s *service) lockInProcess(ctx context.Context, w http.ResponseWriter, key, fp string, o order) {
	if err := stores.ValidateKey(stores.KeyRef{Key: key}); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m, _ := s.locks.LoadOrStore(key, new(sync.Mutex))
	mu := m.(*sync.Mutex)
	mu.Lock()
	defer mu.Unlock()
	type entry struct {
		Fingerprint string          `json:"fingerprint"`
		Response    stores.Response `json:"response"`
	}
	ck := "httpsvc:" + s.ns + ":cache:" + key
	if b, err := s.cache.Get(ctx, ck).Bytes(); err == nil {
		var e entry
		if json.Unmarshal(b, &e) == nil {
			if e.Fingerprint != fp {
				http.Error(w, stores.ErrMismatch.Error(), http.StatusUnprocessableEntity)
				return
			}
			reply(w, e.Response)
			return
		}
	} else if !errors.Is(err, goredis.Nil) {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	resp, err := s.charge(ctx, o, "")
	if err != nil {
		resp = stores.Response{Status: http.StatusInternalServerError, Body: "error: " + err.Error()}
	}
	b, _ := json.Marshal(entry{Fingerprint: fp, Response: resp})
	if err := s.cache.Set(ctx, ck, b, time.Hour).Err(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	reply(w, resp)
}
