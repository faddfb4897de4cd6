package main

import (
	"io"
	"syscall"
	"testing"
	"time"
)

// TestInterruptTwiceAtOnceIsOnce: the same signal delivered twice at once
// (a process group's Ctrl-C, timeout -s INT) stops the run as one does,
// writing its results; a second one later stops it at once.
func TestInterruptTwiceAtOnceIsOnce(t *testing.T) {
	exited := make(chan struct{}, 1)
	ctx, stop := interruptible(io.Discard, func() { exited <- struct{}{} })
	defer stop()
	syscall.Kill(syscall.Getpid(), syscall.SIGINT)
	syscall.Kill(syscall.Getpid(), syscall.SIGINT)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the first signal did not stop the run")
	}
	select {
	case <-exited:
		t.Fatal("the same signal twice at once stopped the run at once")
	case <-time.After(200 * time.Millisecond):
	}
	time.Sleep(sameSignal)
	syscall.Kill(syscall.Getpid(), syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("a second signal later did not stop the run at once")
	}
}

// TestHangupStopsAsAnInterrupt: SIGHUP (the terminal closed, an ssh
// session dropped) stops a run as Ctrl-C does, its results written,
// where it killed the process with nothing said.
func TestHangupStopsAsAnInterrupt(t *testing.T) {
	ctx, stop := interruptible(io.Discard, func() {})
	defer stop()
	syscall.Kill(syscall.Getpid(), syscall.SIGHUP)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("SIGHUP did not stop the run")
	}
}
