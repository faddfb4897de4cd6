package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults/netfault"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/httpcheck"
	"github.com/idemcheck/idemcheck/harness/httpfault"
	"github.com/idemcheck/idemcheck/harness/httpload"
	"github.com/idemcheck/idemcheck/harness/httpreport"
	"github.com/idemcheck/idemcheck/harness/nemesis"
	"github.com/idemcheck/idemcheck/harness/servers"
)

const httpHelp = `Usage: idemcheck http --target URL [--target URL ...] [flags]
       idemcheck http --cmd "command" [--instances N] [--server redis|postgres] [flags]
       idemcheck http --config FILE [flags]

Tests an HTTP service's Idempotency-Key handling from outside.

Concurrent clients POST JSON orders {"order": "...", "amount": N} with an
Idempotency-Key header to the service's instances, each behind its own
fault proxy (latency, resets, lost replies); they retry with the same key,
reuse keys with other bodies, and send missing and over-long keys. The
service charges each order at a fake payment provider that idemcheck
serves on 127.0.0.1 (its URL is in IDEM_PROVIDER_URL when idemcheck starts
the instances, or at --provider-port), and the provider counts the effects.
The provider answers {"charge": "ch_N"}; the service's answer should carry
that charge id, so that the checkers can tell which charges a client saw.
The checkers judge the requests, answers and effects: at most one charge
per order, replay fidelity, 400/409/422 as the Idempotency-Key draft says,
and liveness once the faults heal.

Targets, either:
  --target URL [--target URL ...]   instances someone else started
  --cmd "command" --instances N     idemcheck starts N instances, each with
        PORT (also "{port}" in the command), IDEM_PROVIDER_URL, IDEM_INSTANCE
        and IDEM_NAMESPACE set, and kills, pauses and restarts them
  --config FILE                     the same as JSON: {"targets": [...]} or
        {"cmd": "...", "instances": N, "path": "/orders", "server": "redis"}

Exit codes: 0 every checker passed (or, with --expect, the expected checker
failed), 1 a violation (or, with --expect, it did not show), 2 bad usage or
a bad target, 3 interrupted.
`

// httpConfig is the --config file; flags given on the command line win.
type httpConfig struct {
	Targets   []string `json:"targets"`
	Cmd       string   `json:"cmd"`
	Instances int      `json:"instances"`
	Path      string   `json:"path"`
	Server    string   `json:"server"`
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func cmdHTTP(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("http", httpHelp)
	var targets stringList
	fs.Var(&targets, "target", "URL of a running instance to POST to (repeat for each instance)")
	config := fs.String("config", "", "JSON file naming the targets or the command (see above)")
	command := fs.String("cmd", "", "shell command that starts one instance")
	instances := fs.Int("instances", 2, "instances to start with --cmd")
	path := fs.String("path", "/orders", "path to POST to on instances started with --cmd")
	server := fs.String("server", "", "start a shared server for the instances: redis or postgres (its address is in IDEM_STORE_ADDR)")
	duration := fs.Duration("duration", 10*time.Second, "how long the clients run")
	clients := fs.Int("clients", 8, "concurrent clients")
	seed := fs.Int64("seed", 1, "seed of the workload, the provider and the fault schedule")
	random := fs.Bool("random", false, "spread requests over the instances at random (default round-robin)")
	maxKey := fs.Int("max-key-len", 255, "longest key the service accepts; longer keys must get 400 (0: send none)")
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
	out := fs.String("out", "", "directory for report.txt, history.jsonl, summary.json and instance logs (default results/http-<time>)")
	expect := fs.String("expect", "", "checker[:cause] that must fail (for mutants): exit 0 if it does, 1 if not")
	if err := parse(fs, httpHelp, args, stdout); err != nil {
		return exitUsage, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
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
	}
	switch {
	case len(targets) == 0 && *command == "":
		return exitUsage, usagef("http: give --target URL (one per instance), --cmd \"…\" --instances N, or --config FILE")
	case len(targets) > 0 && *command != "":
		return exitUsage, usagef("http: give either --target or --cmd, not both")
	case *command != "" && *instances < 1:
		return exitUsage, usagef("http: --instances must be at least 1")
	case *server != "" && !servers.Kind(*server).Known():
		return exitUsage, usagef("http: --server %q: want redis or postgres", *server)
	case *clients < 1 || *duration <= 0 || *gap <= 0 || *window <= 0 || *provFail < 0 || *provFail > 1:
		return exitUsage, usagef("http: --clients, --duration, --fault-gap and --fault-window must be positive and --provider-fail in [0, 1]")
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
		dir = filepath.Join("results", "http-"+time.Now().UTC().Format("20060102-150405.000"))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return exitUsage, usagef("http: --out: %v", err)
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
	ready := func(ctx context.Context, in *httpfault.Instance) error {
		return in.Ready(ctx, 20*time.Second, func(ctx context.Context, u string) error { return httpload.Ping(ctx, u, time.Second) })
	}
	if *command != "" {
		env := []string{"IDEM_NAMESPACE=" + runID}
		if *server != "" {
			stop := servers.CloseAllOnSignal()
			defer stop()
			srv, err := servers.Start(ctx, servers.Kind(*server), servers.Options{})
			if err != nil {
				return exitUsage, fmt.Errorf("http: --server %s: %w", *server, err)
			}
			defer srv.Close(context.WithoutCancel(ctx))
			env = append(env, "IDEM_STORE_ADDR="+srv.Addr)
		}
		for i := 1; i <= *instances; i++ {
			name := "i" + strconv.Itoa(i)
			port, err := httpfault.FreePort()
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
			direct = append(direct, "http://"+in.Addr()+*path)
		}
		for _, in := range insts {
			if err := ready(ctx, in); err != nil {
				return exitUsage, fmt.Errorf("http: %v (its log: %s)", err, filepath.Join(dir, in.Name+".log"))
			}
		}
	} else {
		for i, t := range targets {
			u, err := url.Parse(t)
			if err != nil || u.Scheme != "http" || u.Host == "" {
				return exitUsage, usagef("http: --target %q: want an http:// URL", t)
			}
			if err := httpload.Ping(ctx, t, 3*time.Second); err != nil {
				return exitUsage, err
			}
			names = append(names, "i"+strconv.Itoa(i+1))
			direct = append(direct, t)
		}
		fmt.Fprintf(stderr, "payment provider: %s\n", prov.URL(""))
	}

	// Each instance behind its own proxy: the clients POST through it.
	var proxies []nemesis.Proxy
	var loadTargets []httpload.Target
	for i, d := range direct {
		u, _ := url.Parse(d)
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "80")
		}
		p, err := netfault.Start(names[i], host)
		if err != nil {
			return exitUsage, err
		}
		defer p.Close()
		proxies = append(proxies, p)
		u.Host = p.Addr()
		loadTargets = append(loadTargets, httpload.Target{Name: names[i], URL: u.String()})
	}

	load, err := httpload.New(httpload.Config{Targets: loadTargets, Clients: *clients, Duration: *duration, Seed: *seed,
		RunID: runID, Random: *random, MaxKeyLen: *maxKey, Timeout: *timeout, MaxAttempts: *attempts, Mix: httpload.DefaultMix}, h)
	if err != nil {
		return exitUsage, usagef("http: %v", err)
	}
	sched := httpfault.Schedule{Seed: *seed, Process: *procFaults && *command != "", Network: *netFaults, Gap: *gap, Window: *window, Ready: ready}
	fctx, stopFaults := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var faultErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		httpfault.WatchStalls(fctx, h, 300*time.Millisecond)
	}()
	go func() {
		defer wg.Done()
		if insts == nil {
			faultErr = sched.Run(fctx, h, names, nil, proxies)
		} else {
			faultErr = sched.Run(fctx, h, names, insts, proxies)
		}
	}()
	load.Run(ctx)
	stopFaults()
	wg.Wait()
	if faultErr != nil {
		return exitUsage, fmt.Errorf("http: %v", faultErr)
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "idemcheck http: interrupted")
		return exitUnknown, nil
	}
	probed := load.Probe(ctx, *settle)

	results := httpcheck.Run(httpcheck.Evidence{Hist: h, Ledger: ledger})
	run := httpreport.Run{Targets: direct, Seed: *seed, Duration: duration.String(), Clients: *clients, Command: *command}
	if err := httpreport.Write(stdout, run, h, ledger, results); err != nil {
		return exitUsage, err
	}
	if err := httpreport.WriteDir(dir, run, h, ledger, results); err != nil {
		return exitUsage, fmt.Errorf("http: writing %s: %v", dir, err)
	}
	fmt.Fprintf(stdout, "probed %d unsettled keys after the faults; results in %s\n", probed, dir)
	if expChecker == "" {
		if httpreport.Pass(results) {
			return exitPass, nil
		}
		return exitFail, nil
	}
	for _, r := range results {
		if r.Checker != expChecker || r.Pass {
			continue
		}
		for _, c := range r.Causes() {
			if expCause == "" || c == expCause {
				fmt.Fprintf(stdout, "expected: %s failed with cause %s\n", expChecker, c)
				return exitPass, nil
			}
		}
	}
	fmt.Fprintf(stdout, "NOT as expected: %s did not fail with cause %q\n", expChecker, expCause)
	return exitFail, nil
}
