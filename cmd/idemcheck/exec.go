package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/execstore"
)

// execHelp is the part of a command's help on stores in other languages.
const execHelp = `
A store in any language: --store exec --cmd "python3 mystore.py" starts the
store as a child process (one per scenario's store, one per worker) and
speaks JSON lines with it over stdin/stdout (docs/protocol.md). Its hello
says what it declares; a store that needs Redis or Postgres gets the
address of the server idemcheck starts in IDEM_STORE_ADDR (and in its open
request). --config FILE gives the same as JSON:
{"store": "exec", "cmd": "python3 mystore.py", "variant": "correct"}.
A store that breaks the protocol stops the run: one line names the line,
exit 2.
`

// storeFlags are --cmd and --config, beside --store and --variant.
type storeFlags struct {
	cmd, config *string
}

// storeConfig is the --config file of the store commands; flags given on
// the command line win.
type storeConfig struct {
	Store   string `json:"store"`
	Cmd     string `json:"cmd"`
	Variant string `json:"variant"`
}

func addStoreFlags(fs *flag.FlagSet) storeFlags {
	return storeFlags{
		cmd:    fs.String("cmd", "", `with --store exec: the shell command that starts the store (a child process speaking docs/protocol.md)`),
		config: fs.String("config", "", `JSON file: {"store", "cmd", "variant"} (flags given win)`),
	}
}

// lookup resolves --store (with --cmd and --config) to a backend. For
// exec, it starts the store once to read its hello, and returns its
// command too (nil for a registered backend).
func (f storeFlags) lookup(ctx context.Context, fs *flag.FlagSet, store, variant *string) (stores.Backend, *execstore.Command, error) {
	if *f.config != "" {
		b, err := os.ReadFile(*f.config)
		if err != nil {
			return stores.Backend{}, nil, usagef("--config: %v", err)
		}
		var c storeConfig
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return stores.Backend{}, nil, usagef("--config %s: %v", *f.config, err)
		}
		if c.Store != "" && !given(fs, "store") {
			*store = c.Store
		}
		if c.Cmd != "" && !given(fs, "cmd") {
			*f.cmd = c.Cmd
		}
		if c.Variant != "" && variant != nil && !given(fs, "variant") {
			*variant = c.Variant
		}
		if c.Variant != "" && c.Variant != stores.Correct && variant == nil {
			// A command without --variant (lab ran the correct store)
			// never said it ignored the config's.
			return stores.Backend{}, nil, usagef("--config %s: variant %q: idemcheck %s has no --variant, and would ignore it (lab runs the correct store; demo names its mutant as its argument)", *f.config, c.Variant, fs.Name())
		}
	}
	if *store != "exec" {
		if *f.cmd != "" {
			return stores.Backend{}, nil, usagef("--cmd is for --store exec (a store in another language), not --store %s", *store)
		}
		b, err := stores.Lookup(*store)
		if err != nil {
			return stores.Backend{}, nil, usageError{err.Error()}
		}
		return b, nil, nil
	}
	if *f.cmd == "" {
		return stores.Backend{}, nil, usagef(`--store exec needs --cmd "the command that starts the store"`)
	}
	c, err := execstore.Probe(ctx, *f.cmd, nil)
	if err != nil {
		return stores.Backend{}, nil, usageError{err.Error()}
	}
	return c.Backend(), c, nil
}

// execRun ties a run to an exec store's command: the workers start the
// same command, and a protocol error cancels the run (the returned
// context). done returns the protocol error, if any, as the run's error.
func execRun(ctx context.Context, c *execstore.Command, workerCmd []string) (context.Context, []string, func() error) {
	if c == nil {
		return ctx, workerCmd, func() error { return nil }
	}
	ctx, cancel := context.WithCancel(ctx)
	c.OnFatal(func(error) { cancel() })
	if len(workerCmd) > 0 {
		hello, _ := json.Marshal(c.Hello)
		workerCmd = append(workerCmd, "--store", c.Name(), "--cmd", c.Line, "--hello", string(hello))
	}
	return ctx, workerCmd, func() error {
		cancel()
		if err := c.Fatal(); err != nil {
			return usageError{err.Error()}
		}
		return nil
	}
}

// serverKind is the kind of server a backend needs: its name, or for an
// exec store the server its hello names.
func serverKind(backend string) string {
	if k := execstore.ServerKind(backend); k != "" {
		return k
	}
	return backend
}

// registerWorkerStore registers, in a worker process, the exec store the
// harness names (its command, and the hello it said to the harness, so
// the worker need not start it once more to hear it): the worker then
// opens it as any backend.
func registerWorkerStore(name, line, hello string) error {
	if line == "" {
		return nil
	}
	c := &execstore.Command{Line: line}
	if err := json.Unmarshal([]byte(hello), &c.Hello); err != nil {
		return fmt.Errorf("worker: --hello: %v", err)
	}
	b := c.Backend()
	// The worker opens the variant the harness names; the registry
	// knows only the documented mutants, and need not know the store's.
	b.Name, b.Mutants = name, nil
	stores.Register(b)
	return nil
}

// replayBackend is the backend of a saved run: a registered one, or the
// exec store of line, else of the saved run's --cmd.
func replayBackend(ctx context.Context, name, line string, argv []string) (stores.Backend, *execstore.Command, error) {
	if execstore.ServerKind(name) == "" && name != "exec" {
		b, err := stores.Lookup(name)
		return b, nil, err
	}
	if line == "" {
		line = argvCmd(argv)
	}
	if line == "" {
		return stores.Backend{}, nil, fmt.Errorf("the run was of an exec store, and neither --cmd nor its saved command line says which")
	}
	c, err := execstore.Probe(ctx, line, nil)
	if err != nil {
		return stores.Backend{}, nil, err
	}
	return c.Backend(), c, nil
}

// argvCmd is the --cmd of a saved command line, or "".
func argvCmd(argv []string) string {
	for i, a := range argv {
		if (a == "--cmd" || a == "-cmd") && i+1 < len(argv) {
			return argv[i+1]
		}
		if v, ok := strings.CutPrefix(strings.TrimLeft(a, "-"), "cmd="); ok {
			return v
		}
	}
	return ""
}

// storeArgs is how a reproduce line names the run's store: --store and,
// for an exec store, its --cmd.
func storeArgs(backend string, argv []string) string {
	if backend == "exec" || execstore.ServerKind(backend) != "" {
		return fmt.Sprintf("exec --cmd %q", argvCmd(argv))
	}
	return backend
}
