package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults/netfault"
	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/httpcheck"
	"github.com/idemcheck/idemcheck/harness/httpfault"
	"github.com/idemcheck/idemcheck/harness/httpload"
	"github.com/idemcheck/idemcheck/harness/httpreport"
	"github.com/idemcheck/idemcheck/harness/nemesis"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/internal/loopback"
)

// httpConfig is the --config file; flags given on the command line win.
type httpConfig struct {
	Targets     []string        `json:"targets"`
	Cmd         string          `json:"cmd"`
	Instances   int             `json:"instances"`
	Path        string          `json:"path"`
	Server      string          `json:"server"`
	Method      string          `json:"method"`
	Headers     []string        `json:"headers"`
	KeyFormat   string          `json:"key_format"`
	KeyHeader   string          `json:"key_header"`
	KeyAt       string          `json:"key_at"`
	Body        json.RawMessage `json:"body"` // a JSON object, or a string (a form)
	BodyType    string          `json:"body_type"`
	OrderAt     string          `json:"order_at"`
	AmountAt    string          `json:"amount_at"`
	Key         string          `json:"key"`
	MaxKeyLen   *int            `json:"max_key_len"`
	InFlightTTL string          `json:"inflight_ttl"`
	Settle      string          `json:"settle"`
	SavesErrors *bool           `json:"saves_errors"`
	ReplayAny   *bool           `json:"replay_any_2xx"`
	Insecure    *bool           `json:"insecure"`
	CACert      string          `json:"cacert"`
	Scheme      string          `json:"scheme"`
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func cmdHTTP(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("http", httpHelp)
	var targets stringList
	fs.Var(&targets, "target", "URL of a running instance to POST to, http:// or https:// (repeat for each instance)")
	insecure := fs.Bool("insecure", false, "https targets: accept any certificate (a test service's own)")
	caFile := fs.String("cacert", "", "https targets: trust the CA certificates in this PEM file (default: the system's)")
	scheme := fs.String("scheme", "http", "what instances started with --cmd speak: http, or https (their certificates trusted as --target's)")
	config := fs.String("config", "", "JSON file naming the targets or the command (see above)")
	command := fs.String("cmd", "", "shell command that starts one instance")
	instances := fs.Int("instances", 2, "instances to start with --cmd")
	path := fs.String("path", "/orders", "path to POST to on instances started with --cmd")
	server := fs.String("server", "", "start a shared server for the instances: redis or postgres (its address is in IDEM_STORE_ADDR)")
	duration := fs.Duration("duration", 10*time.Second, "how long the clients run")
	clients := fs.Int("clients", 8, "concurrent clients")
	seed := fs.Int64("seed", 1, "seed of the workload, the provider and the fault schedule")
	random := fs.Bool("random", false, "spread requests over the instances at random (default round-robin)")
	maxKey := fs.Int("max-key-len", 255, "longest key the service accepts; longer keys must get 400 (0: no limit declared, none sent)")
	method := fs.String("method", "POST", "HTTP method of every request")
	var headers stringList
	fs.Var(&headers, "H", `header sent with every request, "Name: value" (repeatable)`)
	fs.Var(&headers, "header", `the same as -H`)
	keyFormat := fs.String("key-format", httpload.KeyUUID, "keys: uuid (v4), ulid, or a pattern (%d sequence, %x random hex, %s run id)")
	keyHeader := fs.String("key-header", "", "the header the key goes in (default "+httpload.DefaultKeyHeader+")")
	keyAt := fs.String("key-at", "", "put the key in the body instead, at this dotted JSON path or form field (such as idempotency_key)")
	bodyTmpl := fs.String("body", "", "body template: a JSON object, or a form (a=b&c=d) with --body-type form")
	bodyType := fs.String("body-type", httpload.BodyJSON, "json or form")
	orderAt := fs.String("order-at", "order", "where the order goes: a dotted JSON path, or a form field")
	amountAt := fs.String("amount-at", "amount", "where the amount (an integer) goes")
	keyPolicy := fs.String("key", "required", "required (a request without a key must get 400) or optional (served as a plain request)")
	inflightTTL := fs.Duration("inflight-ttl", 0, "how long the service keeps a key in flight after its owner died or gave up (a 5xx, 202 or 408, or no answer) (0: not declared); the final probes may run that long, ending once every key is settled")
	savesErrors := fs.Bool("saves-errors", false, "the service saves its 5xx answers and replays them for the key, whatever caused them (Stripe does): a key that replays one 5xx is settled")
	replayAny := fs.Bool("replay-any-2xx", false, "the service replays a success with the first one's body but perhaps another 2xx (201, then 200: PayPal does): replays are compared by body between two 2xx")
	netFaults := fs.Bool("net-faults", true, "latency, resets and lost replies on each instance's proxy")
	procFaults := fs.Bool("process-faults", true, "kill, pause and restart instances started with --cmd")
	gap := fs.Duration("fault-gap", 800*time.Millisecond, "mean time between two faults")
	window := fs.Duration("fault-window", 400*time.Millisecond, "mean length of one fault")
	provLatency := fs.Duration("provider-latency", 20*time.Millisecond, "how long a charge takes at the provider (plus up to as much jitter)")
	provFail := fs.Float64("provider-fail", 0.05, "share of charges that go through and then answer 503")
	provPort := fs.Int("provider-port", 0, "serve the provider on this port of 127.0.0.1 (0: any free port)")
	timeout := fs.Duration("timeout", 3*time.Second, "timeout of one request")
	attempts := fs.Int("attempts", 6, "attempts per operation (retries use the same key and body)")
	settle := fs.Duration("settle", 10*time.Second, "how long the final probes may take once every fault healed")
	startTimeout := fs.Duration("start-timeout", time.Minute, "how long an instance started with --cmd may take to answer HTTP (at the start, after a kill, after a crash)")
	out := fs.String("out", "", "directory for report.txt, history.jsonl, summary.json and instance logs (default results/http-<time>)")
	expect := fs.String("expect", "", "checker[:cause] that must fail (for mutants): exit 0 if it does, 1 if not")
	if err := parse(fs, httpHelp, args, stdout); err != nil {
		return exitUsage, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	settleDur := *settle
	if *config != "" {
		b, err := os.ReadFile(*config)
		if err != nil {
			return exitUsage, usagef("http: --config: %v", err)
		}
		var c httpConfig
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return exitUsage, usagef("http: --config %s: %v", *config, err)
		}
		if len(targets) == 0 {
			targets = c.Targets
		}
		if *command == "" {
			*command = c.Cmd
		}
		if !set["instances"] && c.Instances > 0 {
			*instances = c.Instances
		}
		if !set["path"] && c.Path != "" {
			*path = c.Path
		}
		if *server == "" {
			*server = c.Server
		}
		strs := []struct {
			flag string
			dst  *string
			v    string
		}{{"method", method, c.Method}, {"key-format", keyFormat, c.KeyFormat}, {"key-header", keyHeader, c.KeyHeader}, {"key-at", keyAt, c.KeyAt}, {"body-type", bodyType, c.BodyType},
			{"order-at", orderAt, c.OrderAt}, {"amount-at", amountAt, c.AmountAt}, {"key", keyPolicy, c.Key}}
		for _, f := range strs {
			if !set[f.flag] && f.v != "" {
				*f.dst = f.v
			}
		}
		if !set["H"] && !set["header"] {
			headers = c.Headers
		}
		if !set["body"] && len(c.Body) > 0 {
			var str string
			if json.Unmarshal(c.Body, &str) == nil {
				*bodyTmpl = str
			} else {
				*bodyTmpl = string(c.Body)
			}
		}
		if !set["max-key-len"] && c.MaxKeyLen != nil {
			*maxKey = *c.MaxKeyLen
		}
		if !set["saves-errors"] && c.SavesErrors != nil {
			*savesErrors = *c.SavesErrors
		}
		if !set["replay-any-2xx"] && c.ReplayAny != nil {
			*replayAny = *c.ReplayAny
		}
		if !set["insecure"] && c.Insecure != nil {
			*insecure = *c.Insecure
		}
		if !set["cacert"] && c.CACert != "" {
			*caFile = c.CACert
		}
		if !set["scheme"] && c.Scheme != "" {
			*scheme = c.Scheme
		}
		for _, d := range []struct {
			flag string
			dst  *time.Duration
			v    string
		}{{"inflight-ttl", inflightTTL, c.InFlightTTL}, {"settle", settle, c.Settle}} {
			if set[d.flag] || d.v == "" {
				continue
			}
			v, err := time.ParseDuration(d.v)
			if err != nil {
				return exitUsage, usagef("http: --config %s: %s: %v", *config, d.flag, err)
			}
			*d.dst = v
		}
		settleDur = *settle
	}
	hdr := http.Header{}
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return exitUsage, usagef("http: -H %q: want \"Name: value\"", h)
		}
		hdr.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	if *keyPolicy != "required" && *keyPolicy != "optional" {
		return exitUsage, usagef("http: --key %q: want required or optional", *keyPolicy)
	}
	reqShape, err := httpload.Request{Method: *method, Header: hdr, KeyFormat: *keyFormat, KeyHeader: *keyHeader, KeyAt: *keyAt, BodyType: *bodyType, Body: *bodyTmpl,
		OrderAt: *orderAt, AmountAt: *amountAt, KeyOptional: *keyPolicy == "optional"}.Normalize()
	if err != nil {
		return exitUsage, usagef("http: %v", err)
	}
	if *maxKey < 0 || *inflightTTL < 0 || *settle <= 0 {
		return exitUsage, usagef("http: --max-key-len and --inflight-ttl must not be negative, --settle must be positive")
	}
	// The in-flight TTL bounds the final probes: a key a killed instance
	// left in flight is released only then.
	if floor := *inflightTTL + 2*time.Second; *inflightTTL > 0 && settleDur < floor {
		settleDur = floor
	}
	policy := httpcheck.Policy{KeyOptional: reqShape.KeyOptional, InFlightTTL: *inflightTTL, Settle: settleDur, SavesErrors: *savesErrors, ReplayAny2xx: *replayAny}
	switch {
	case len(targets) == 0 && *command == "":
		return exitUsage, usagef("http: give --target URL (one per instance), --cmd \"…\" --instances N, or --config FILE")
	case len(targets) > 0 && *command != "":
		return exitUsage, usagef("http: give either --target or --cmd, not both")
	case *command != "" && (*instances < 1 || *instances > maxInstances):
		return exitUsage, usagef("http: --instances must be at least 1 and at most %d, got %d", maxInstances, *instances)
	case *clients > harness.MaxClients || *duration > maxHTTPDuration || *attempts > maxAttempts:
		return exitUsage, usagef("http: --clients at most %d, --duration at most %v and --attempts at most %d (got %d, %v, %d)",
			harness.MaxClients, maxHTTPDuration, maxAttempts, *clients, *duration, *attempts)
	case *server != "" && !servers.Kind(*server).Known():
		return exitUsage, usagef("http: --server %q: want redis or postgres", *server)
	case *clients < 1 || *duration <= 0 || *gap <= 0 || *window <= 0 || *provFail < 0 || *provFail > 1:
		return exitUsage, usagef("http: --clients, --duration, --fault-gap and --fault-window must be positive and --provider-fail in [0, 1]")
	case *attempts < 1 || *timeout <= 0 || *provLatency < 0 || *startTimeout <= 0:
		return exitUsage, usagef("http: --attempts, --timeout and --start-timeout must be positive and --provider-latency not negative")
	case *scheme != "http" && *scheme != "https":
		return exitUsage, usagef("http: --scheme %q: want http or https", *scheme)
	case (*insecure || *caFile != "") && !slices.ContainsFunc(targets, isHTTPS) && (*command == "" || *scheme != "https"):
		return exitUsage, usagef("http: --insecure and --cacert are for https:// targets (or --cmd with --scheme https)")
	}
	tlsBase, err := targetTLS(*caFile, *insecure)
	if err != nil {
		return exitUsage, err
	}
	var expChecker, expCause string
	if *expect != "" {
		expChecker, expCause, _ = strings.Cut(*expect, ":")
		causes, known := httpcheck.Causes[expChecker]
		if !known {
			return exitUsage, usagef("http: --expect %q: unknown checker", *expect)
		}
		if expCause != "" && !slices.Contains(causes, expCause) {
			return exitUsage, usagef("http: --expect %q: %s names no cause %q (its causes: %s)", *expect, expChecker, expCause, strings.Join(causes, ", "))
		}
	}
	dir := *out
	if dir == "" {
		var err error
		if dir, err = newHTTPDir("results", time.Now()); err != nil {
			return exitUsage, usagef("http: %v", err)
		}
	}
	if *out == "" {
		sayCrashed(stderr, filepath.Dir(dir))
	} else if err := keepKilledRun(dir, stderr); err != nil {
		return exitUsage, usagef("http: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return exitUsage, usagef("http: cannot write results to %s: %v", dir, unwrapPath(err))
	}
	// Marked as a run's directory: a later run says when it crashed
	// (sayCrashed), as it does for a store run's.
	if err := os.WriteFile(filepath.Join(dir, report.Marker), nil, 0o644); err != nil {
		return exitUsage, usagef("http: cannot write results to %s: %v", dir, unwrapPath(err))
	}
	if err := report.ReserveEnd(dir); err != nil {
		return exitUsage, usagef("http: cannot write results to %s: %v", dir, unwrapPath(err))
	}
	runID := fmt.Sprintf("r%d_%d", *seed, time.Now().UnixNano()%1e9)

	h := history.New()
	ledger := history.NewLedger()
	prov, err := httpload.StartProvider(httpload.ProviderConfig{Latency: *provLatency, FailRate: *provFail, Seed: *seed}, h, ledger, *provPort)
	if err != nil {
		return exitUsage, fmt.Errorf("http: %v", err)
	}
	defer prov.Close()

	var names, direct []string
	var insts []*httpfault.Instance
	runCtx := ctx
	ready := func(ctx context.Context, in *httpfault.Instance) error {
		// An interrupt ends the wait too: a restart's context outlives
		// the load's end (its faults heal after it), not the run (a
		// Ctrl-C during a slow restart waited out --start-timeout).
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(runCtx, cancel)()
		err := in.Ready(ctx, *startTimeout, func(ctx context.Context, u string) error { return pingInstance(ctx, u, *scheme, tlsBase) })
		if err != nil && runCtx.Err() != nil {
			return fmt.Errorf("instance %s: the run was interrupted before it answered", in.Name)
		}
		return err
	}
	sup := httpfault.NewSupervisor(ctx, h, ready)
	if *command != "" {
		// Instances a killed run left behind go first (their ports and
		// their shared store would meet this run's).
		if n, err := httpfault.Reap(); err != nil {
			fmt.Fprintf(stderr, "idemcheck http: removing instances of killed runs: %v\n", err)
		} else if n > 0 {
			fmt.Fprintf(stderr, "idemcheck http: stopped %d service instance(s) left running by a killed idemcheck run\n", n)
		}
		env := []string{"IDEM_NAMESPACE=" + runID}
		if *server != "" {
			// An interrupt ends the run's context (and this start); the
			// deferred Close removes the server once the report is out.
			srv, err := servers.Start(ctx, servers.Kind(*server), servers.Options{})
			if err != nil && ctx.Err() != nil {
				return interruptedAtStart(stderr, dir)
			}
			if err != nil {
				return exitUsage, fmt.Errorf("http: --server %s: %w", *server, err)
			}
			defer srv.Close(context.WithoutCancel(ctx))
			env = append(env, "IDEM_STORE_ADDR="+srv.Addr)
		}
		for i := 1; i <= *instances; i++ {
			if ctx.Err() != nil {
				return interruptedAtStart(stderr, dir)
			}
			name := "i" + strconv.Itoa(i)
			port, err := loopback.FreePort()
			if err != nil {
				return exitUsage, fmt.Errorf("http: no free port: %v", err)
			}
			logf, err := os.Create(filepath.Join(dir, name+".log"))
			if err != nil {
				return exitUsage, err
			}
			defer logf.Close()
			in := httpfault.NewInstance(name, port, *command,
				append([]string{"IDEM_PROVIDER_URL=" + prov.URL(name), "IDEM_INSTANCE=" + name}, env...), logf)
			if err := in.Start(); err != nil {
				return exitUsage, err
			}
			defer in.Kill()
			insts = append(insts, in)
			names = append(names, name)
			direct = append(direct, *scheme+"://"+in.Addr()+*path)
		}
		defer sup.Stop() // before the instances' kills: nothing restarted behind them
		for _, in := range insts {
			if err := ready(ctx, in); err != nil {
				if ctx.Err() != nil {
					return interruptedAtStart(stderr, dir)
				}
				return exitUsage, fmt.Errorf("http: %v (its log: %s)", err, filepath.Join(dir, in.Name+".log"))
			}
			sup.Watch(in) // from now on an exit is a crash: recorded and restarted
		}
	} else {
		for i, t := range targets {
			u, err := url.Parse(t)
			if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
				return exitUsage, usagef("http: --target %q: want an http:// or https:// URL", t)
			}
			if err := httpload.Ping(ctx, t, tlsFor(tlsBase, u), 3*time.Second); err != nil {
				if ctx.Err() != nil {
					return interruptedAtStart(stderr, dir)
				}
				return exitUsage, untrusted(err)
			}
			names = append(names, "i"+strconv.Itoa(i+1))
			direct = append(direct, t)
		}
		fmt.Fprintf(stderr, "payment provider: %s\n", prov.URL(""))
	}

	// Each instance behind its own proxy: the clients POST through it,
	// with the instance's own Host, or one for all (httpload.ServiceHost;
	// -H "Host: name" chooses it).
	var proxies []nemesis.Proxy
	var loadTargets []httpload.Target
	shared := cmp.Or(reqShape.Header.Get("Host"), httpload.ServiceHost(direct))
	for i, d := range direct {
		u, _ := url.Parse(d)
		own, conf := u.Host, tlsFor(tlsBase, u)
		p, err := netfault.Start(names[i], hostPort(u))
		if err != nil {
			return exitUsage, err
		}
		defer p.Close()
		proxies = append(proxies, p)
		u.Host = p.Addr()
		loadTargets = append(loadTargets, httpload.Target{Name: names[i], URL: u.String(), Host: cmp.Or(shared, own), TLS: conf})
	}

	// The run journals what it records as it goes (harness.CreateJournal):
	// a run whose process dies leaves its evidence, and `idemcheck
	// recheck` reports it (recoverHTTP). Its first line is the run.
	run := httpreport.Run{Targets: direct, Seed: *seed, Duration: duration.String(), Clients: *clients, Command: *command,
		Declared: declarations(reqShape, *path, *command != "", *maxKey, policy, shared, len(direct)), Policy: policy}
	if slices.ContainsFunc(direct, isHTTPS) {
		run.Declared = append(run.Declared, tlsDeclared(*caFile, *insecure))
	}
	journal, err := harness.CreateJournal(dir)
	if err != nil {
		return exitUsage, fmt.Errorf("http: the run's journal: %v", err)
	}
	written := false
	defer func() {
		if err := harness.EndJournal(journal, dir, written); err != nil {
			fmt.Fprintf(stderr, "idemcheck http: the run's journal stopped: %v (the run stands; had it crashed, it would have been lost)\n", err)
		}
	}()
	journal.Note("", httpreport.JournalNote, run)
	h.JournalTo(journal, "http")
	ledger.JournalTo(journal, "http")

	load, err := httpload.New(httpload.Config{Targets: loadTargets, Clients: *clients, Duration: *duration, Seed: *seed,
		RunID: runID, Random: *random, MaxKeyLen: *maxKey, Timeout: *timeout, MaxAttempts: *attempts, Mix: httpload.DefaultMix,
		Request: reqShape}, h)
	if err != nil {
		return exitUsage, usagef("http: %v", err)
	}
	sched := httpfault.Schedule{Seed: *seed, Process: *procFaults && *command != "", Network: *netFaults, Gap: *gap, Window: *window, Ready: ready}
	fctx, stopFaults := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var problems, down []string
	wg.Add(2)
	go func() {
		defer wg.Done()
		httpfault.WatchStalls(fctx, h, 300*time.Millisecond)
	}()
	go func() {
		defer wg.Done()
		problems, down = sched.Run(fctx, h, names, insts, proxies) // insts nil: targets started by someone else
	}()
	fmt.Fprintf(stderr, "idemcheck http: the load: %d clients for %v\n", *clients, *duration)
	load.Run(ctx)
	stopFaults()
	wg.Wait()
	sup.Wait() // restarts after crashes: the probes come once every instance is back
	// An interrupt still reports: what was recorded is judged, and what
	// the interrupt cut short (the final probes, a run too short to say
	// whether anything was tested) is not (httpcheck.Interrupted).
	interrupted, probed := "", 0
	if ctx.Err() != nil {
		interrupted = "during the load"
	} else {
		fmt.Fprintf(stderr, "idemcheck http: the final probes (up to %v)\n", settleDur)
		probed = load.Probe(ctx, settleDur)
		sup.Wait()
		if ctx.Err() != nil {
			interrupted = "during the final probes"
		}
	}
	if interrupted == "" && !anyAnswer(h.Exchanges()) {
		written = true // nothing to recover: no answer was recorded
		return exitUsage, neverAnswered(h.Exchanges(), *timeout, dir)
	}

	run.Crashes, run.Problems, run.Down, run.Interrupted = sup.Crashes(), problems, down, interrupted
	results, code := judgeHTTP(run, h, ledger)
	if err := httpreport.Write(stdout, run, h, ledger, results); err != nil {
		return exitUsage, err
	}
	// A report that cannot be written (a full disk) is said, and the
	// verdict stands: CI must never read a found bug as a broken setup.
	// The run's last word says it finished, so that its journal is not
	// taken for a dead run's.
	incomplete := ""
	if err := httpreport.WriteDir(dir, run, h, ledger, results); err != nil {
		fmt.Fprintf(stderr, "idemcheck http: writing %s: %v (the verdict stands)\n", dir, err)
		leaveLastWord(stderr, dir, httpreport.Overall(results), interrupted != "", []string{err.Error()})
		incomplete = " (incomplete: its files could not all be written, as said above; the verdict stands)"
	} else {
		report.DropEnded(dir)
		written = true
	}
	fmt.Fprintf(stdout, "probed %d unsettled keys after the faults; results in %s%s\n", probed, dir, incomplete)
	if interrupted == "" && ctx.Err() != nil {
		// The signal said "stopping" on stderr; the run had nothing
		// left to cut, and its verdict is whole (it printed a plain PASS
		// beside the stop).
		fmt.Fprintln(stdout, "(an interrupt came after the final probes had ended: nothing was cut short, and the run is judged whole)")
	}
	if interrupted != "" {
		// A violation in what was recorded stands (exit 1); otherwise
		// not everything was judged (exit 3).
		if code == exitUnknown {
			fmt.Fprintf(stdout, "INTERRUPTED %s: no violation in what was recorded, and not everything was judged\n", interrupted)
		}
		return code, nil
	}
	if expChecker == "" {
		fmt.Fprintln(stdout, httpreport.Closing(results))
		return code, nil
	}
	return expected(stdout, results, expChecker, expCause), nil
}

// expected says whether checker failed with cause (any cause when "")
// and returns the exit code of an --expect run: pass when it did.
func expected(w io.Writer, results []httpcheck.Result, checker, cause string) int {
	for _, r := range results {
		if r.Checker != checker || r.Pass {
			continue
		}
		for _, c := range r.Causes() {
			if cause == "" || c == cause {
				fmt.Fprintf(w, "expected: %s failed with cause %s\n", checker, c)
				return exitPass
			}
		}
		if cause == "" && len(r.Violations) > 0 {
			// A checker whose violations name no cause (replay-fidelity):
			// failing is what was expected (--expect replay-fidelity
			// could never be met).
			fmt.Fprintf(w, "expected: %s failed\n", checker)
			return exitPass
		}
	}
	if cause == "" {
		fmt.Fprintf(w, "NOT as expected: %s did not fail\n", checker)
	} else {
		fmt.Fprintf(w, "NOT as expected: %s did not fail with cause %q\n", checker, cause)
	}
	return exitFail
}

// anyAnswer reports whether any request got an HTTP answer.
func anyAnswer(xs []history.Exchange) bool {
	for _, x := range xs {
		if x.Answered() {
			return true
		}
	}
	return false
}

// neverAnswered says why a run got no answer at all: when every request
// ran out of --timeout, that the service answers slower (a setting, not
// a finding); else the instance logs, and the last error.
func neverAnswered(xs []history.Exchange, timeout time.Duration, dir string) error {
	timedOut := 0
	for _, x := range xs {
		if x.Err == "timeout" {
			timedOut++
		}
	}
	if len(xs) > 0 && timedOut == len(xs) {
		return fmt.Errorf("http: the service answered none of %d requests within --timeout %v: it answers slower than that (a longer --timeout; the instance logs are in %s)", len(xs), timeout, dir)
	}
	last := ""
	if len(xs) > 0 {
		last = "; the last request: " + xs[len(xs)-1].Err
	}
	return fmt.Errorf("http: the service never answered a request (see the instance logs in %s%s)", dir, last)
}

// interruptedAtStart is the end of a run interrupted while its server or
// its instances started: nothing ran, so nothing was judged (exit 3).
func interruptedAtStart(stderr io.Writer, dir string) (int, error) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	where := ""
	if len(logs) > 0 { // none when the server, not an instance, was starting
		where = fmt.Sprintf(" (instance logs in %s)", dir)
	}
	fmt.Fprintf(stderr, "idemcheck http: interrupted while the service started: nothing ran%s\n", where)
	return exitUnknown, nil
}

// newHTTPDir makes a black-box run's default directory under root,
// http-<time> (report.MkdirAt): two runs started in one millisecond
// shared one, each writing over the other's files.
func newHTTPDir(root string, now time.Time) (string, error) {
	return report.MkdirAt(root, now.UTC(), func(stamp string) string { return "http-" + stamp })
}
