package servers

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// CloseAllOnSignal removes this process's containers (CloseAll) when it gets
// SIGINT or SIGTERM, then lets the signal end the process as it would have.
// A CLI calls it once at start and defers stop, which uninstalls the handler;
// a CLI with its own signal handling calls CloseAll from it instead.
func CloseAllOnSignal() (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			signal.Stop(ch)
			ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			if err := CloseAll(ctx); err != nil {
				os.Stderr.WriteString("idemcheck: removing containers: " + oneLine(err.Error()) + "\n")
			}
			cancel()
			// Die of the signal, as without a handler.
			if s, ok := sig.(syscall.Signal); ok {
				signal.Reset(s)
				_ = syscall.Kill(os.Getpid(), s)
				time.Sleep(2 * time.Second)
			}
			os.Exit(130)
		case <-done:
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
		})
	}
}
