package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// envTestService names the service TestHTTPHelperService serves: the
// black-box tests start this test binary as the service under test
// (--cmd), so that a real process is killed, crashes and restarts.
const envTestService = "IDEM_TEST_SERVICE"

// serviceCmd is the --cmd that serves mode from this test binary.
func serviceCmd(t *testing.T, mode string, env ...string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(append(env, envTestService+"="+mode, exe, "-test.run=^TestHTTPHelperService$"), " ")
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestHTTPHelperService is not a test: run with IDEM_TEST_SERVICE set, it
// serves one of the black-box tests' services on PORT until killed (over
// TLS when IDEM_TEST_CERT and IDEM_TEST_KEY name its certificate).
//
//   - strict: accepts only UUID v4 keys, wants "Authorization: Bearer
//     s3cret", the Host in IDEM_TEST_HOST (when set; 421 else)
//     and a form body ref=...&cents=..., answers 201 with its own
//     payment id; its records live in this process (correct on one
//     instance that is never killed).
//   - dead500: answers 500 to every request with a key.
//   - lock423: claims a key by creating a lock file in IDEM_TEST_DIR and
//     answers 423 while the lock is there and no answer was saved: a lock
//     left by a killed instance is held forever.
//   - crash: strict's rules on the default request (a JSON body, no
//     header), but it exits with status 3 on its 5th keyed request.
//   - guarded: strict's rules on the default request, correct, behind
//     what production puts in front of a handler: a limiter that refuses
//     every fourth request (429 or 503), and Go's http.TimeoutHandler, which
//     answers 503 after 50 ms while the handler goes on to charge and
//     save (a retry meanwhile gets 409: the key is in flight). A
//     missing key gets 422, as FastAPI's validation answers.
//   - shedding: guarded's service behind a limiter that sheds fifteen
//     POSTs of sixteen (503), as an overloaded service does.
func TestHTTPHelperService(t *testing.T) {
	mode := os.Getenv(envTestService)
	if mode == "" {
		t.Skip("not a test: the service the black-box tests start")
	}
	s := &testService{mode: mode, provider: os.Getenv("IDEM_PROVIDER_URL"), dir: os.Getenv("IDEM_TEST_DIR"), recs: map[string]*testRec{}}
	fmt.Fprintf(os.Stderr, "test service %s on port %s\n", mode, os.Getenv("PORT"))
	var h http.Handler = s
	switch mode {
	case "guarded":
		h = limitEveryFourth(http.TimeoutHandler(s, 50*time.Millisecond, "timed out"))
	case "shedding":
		h = shedFifteenOfSixteen(s)
	}
	var err error
	if cert := os.Getenv("IDEM_TEST_CERT"); cert != "" {
		err = http.ListenAndServeTLS("127.0.0.1:"+os.Getenv("PORT"), cert, os.Getenv("IDEM_TEST_KEY"), h)
	} else {
		err = http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), h)
	}
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// limitEveryFourth refuses every fourth POST, as a rate limiter in front
// of a service does under load: 429, or 503 every other time (nginx's
// limit_req answers 503), and passes the others to h.
func limitEveryFourth(h http.Handler) http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			switch n.Add(1) % 8 {
			case 4:
				http.Error(w, "rate limited", http.StatusTooManyRequests)
				return
			case 0:
				http.Error(w, "rate limited", http.StatusServiceUnavailable)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// shedFifteenOfSixteen refuses fifteen POSTs of sixteen with 503, as a
// service shedding load does, and passes the sixteenth to h.
func shedFifteenOfSixteen(h http.Handler) http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && n.Add(1)%16 != 0 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

type testRec struct {
	fp     string
	done   bool
	status int
	body   string
}

type testService struct {
	mode, provider, dir string

	mu    sync.Mutex
	recs  map[string]*testRec
	n     int
	keyed int
}

func (s *testService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		io.WriteString(w, "test service\n")
		return
	}
	raw, _ := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	var order string
	switch s.mode {
	case "strict":
		if want := os.Getenv("IDEM_TEST_HOST"); want != "" && r.Host != want {
			http.Error(w, "misdirected: this service is "+want, http.StatusMisdirectedRequest)
			return
		}
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		v, err := url.ParseQuery(string(raw))
		if err != nil || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") || v.Get("ref") == "" || v.Get("cents") == "" {
			http.Error(w, "want a form body ref=...&cents=...", http.StatusBadRequest)
			return
		}
		order = v.Get("ref")
	default:
		var o struct {
			Order string `json:"order"`
		}
		if json.Unmarshal(raw, &o) != nil || o.Order == "" {
			http.Error(w, "want a JSON body", http.StatusBadRequest)
			return
		}
		order = o.Order
	}
	if key == "" && (s.mode == "guarded" || s.mode == "shedding") {
		http.Error(w, `{"detail":[{"loc":["header","idempotency-key"],"msg":"field required"}]}`, http.StatusUnprocessableEntity)
		return
	}
	if key == "" || !uuidV4.MatchString(key) {
		http.Error(w, "Idempotency-Key must be a UUID v4", http.StatusBadRequest)
		return
	}
	if s.mode == "dead500" {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	sum := sha256.Sum256(raw)
	fp := hex.EncodeToString(sum[:])
	if s.mode == "lock423" {
		s.fileLocked(w, key, fp, order)
		return
	}
	s.mu.Lock()
	s.keyed++
	if s.mode == "crash" && s.keyed == 5 {
		fmt.Fprintln(os.Stderr, "boom: crashing on keyed request 5")
		os.Exit(3)
	}
	rec, ok := s.recs[key]
	switch {
	case ok && rec.fp != fp:
		s.mu.Unlock()
		http.Error(w, "key reused with another body", http.StatusUnprocessableEntity)
		return
	case ok && !rec.done:
		s.mu.Unlock()
		http.Error(w, "in flight", http.StatusConflict)
		return
	case ok:
		s.mu.Unlock()
		w.WriteHeader(rec.status)
		io.WriteString(w, rec.body)
		return
	}
	rec = &testRec{fp: fp}
	s.recs[key] = rec
	s.mu.Unlock()
	status, body := s.charge(order)
	s.mu.Lock()
	rec.done, rec.status, rec.body = true, status, body
	s.mu.Unlock()
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// charge calls the provider once (a form body for strict, JSON else) and
// answers with the service's own payment id, never the provider's.
func (s *testService) charge(order string) (int, string) {
	var resp *http.Response
	var err error
	if s.mode == "strict" {
		resp, err = http.PostForm(s.provider, url.Values{"order": {order}})
	} else {
		b, _ := json.Marshal(map[string]string{"order": order})
		resp, err = http.Post(s.provider, "application/json", bytes.NewReader(b))
	}
	if err == nil {
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = errors.New(resp.Status)
		}
	}
	if err != nil {
		return http.StatusBadGateway, "provider: " + err.Error()
	}
	s.mu.Lock()
	s.n++
	id := fmt.Sprintf(`{"payment":"pay_%d"}`, s.n)
	s.mu.Unlock()
	return http.StatusCreated, id
}

func (s *testService) fileLocked(w http.ResponseWriter, key, fp, order string) {
	base := filepath.Join(s.dir, key)
	if b, err := os.ReadFile(base + ".done"); err == nil {
		w.WriteHeader(http.StatusCreated)
		w.Write(b)
		return
	}
	f, err := os.OpenFile(base+".lock", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		http.Error(w, "locked", http.StatusLocked)
		return
	}
	f.WriteString(fp)
	f.Close()
	status, body := s.charge(order)
	if status != http.StatusCreated {
		os.Remove(base + ".lock")
		http.Error(w, body, status)
		return
	}
	os.WriteFile(base+".done", []byte(body), 0o644)
	w.WriteHeader(status)
	io.WriteString(w, body)
}
