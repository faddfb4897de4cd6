package idemtest

import (
	"context"
	"path/filepath"

	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/execstore"
)

// Exec is the factory of a store written in any language and run as a
// child process that speaks the protocol of docs/protocol.md (package
// stores/execstore): line is its shell command, env is added to its
// environment. It starts the store once to read its hello, which gives the
// factory its name, clock and declarations. Each Open starts a process of
// its own. addr is where the stores' data lives, as the hello says: a
// directory for a store that lives in files (each Open gets a file of its
// own there, named by its namespace), a server's address for one that
// lives on a server (each Open gets its namespace on it), nothing for one
// that lives in its process.
func Exec(ctx context.Context, line string, env []string, addr string) (Factory, error) {
	c, err := execstore.Probe(ctx, line, env)
	if err != nil {
		return Factory{}, err
	}
	b := c.Backend()
	at := func(cfg stores.Config) string {
		if b.Lives == stores.File {
			return filepath.Join(addr, cfg.Namespace+".db")
		}
		return addr
	}
	f := Factory{Name: c.Hello.Name, Clock: b.Clock, Semantics: b.Semantics, Fence: b.Fence, WaitsAnnounced: b.WaitsAnnounced,
		Open: func(cfg stores.Config) (stores.Store, error) { return c.Open(ctx, at(cfg), cfg) }}
	if b.Lives == stores.Server {
		f.Addr = addr
		f.OpenAt = func(addr string, cfg stores.Config) (stores.Store, error) { return c.Open(ctx, addr, cfg) }
	}
	return f, nil
}
