package storetest

import (
	"context"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
)

// Parked is a Begin started in the background and stopped at a failpoint
// until Resume: how a counterexample makes other calls happen inside one
// Begin (between its read and its write, say).
type Parked struct {
	resume, done chan struct{}
	d            stores.Decision
	err          error
}

// ParkBegin starts s.Begin(ctx, req) and returns once it has stopped at
// failpoint, or has returned without reaching it (a store whose Begin is
// one statement or script has no read apart from its write to stop
// between).
func ParkBegin(ctx context.Context, s stores.Store, failpoint string, req stores.Request) *Parked {
	p := &Parked{resume: make(chan struct{}), done: make(chan struct{})}
	parked := make(chan struct{})
	ctx = faults.WithHandler(ctx, faults.HandlerFunc(func(_ context.Context, name string) error {
		if name == failpoint {
			close(parked)
			<-p.resume
		}
		return nil
	}))
	go func() {
		defer close(p.done)
		p.d, p.err = s.Begin(ctx, req)
	}()
	select {
	case <-parked:
	case <-p.done:
	}
	return p
}

// Resume lets the parked Begin go on and returns its answer.
func (p *Parked) Resume() (stores.Decision, error) {
	close(p.resume)
	<-p.done
	return p.d, p.err
}
