package main

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// hogPool is the soak's CPU hogs (`idemcheck spin`, internal): n
// processes spinning beside the runs, each started again when it dies
// (a soak's PASS says "beside K CPU hogs", and two hogs killed from
// outside left it saying so over a soak that ran beside none).
type hogPool struct {
	exe      string
	mu       sync.Mutex
	cmds     []*exec.Cmd
	stopped  bool
	restarts int    // hogs that died and were started again
	lost     int    // hogs that died and could not be
	first    string // how the first one died
	wg       sync.WaitGroup
}

// hogRestartPause is how long a dead hog's place stays empty before it
// is started again: a hog that dies at once (the program is gone) does
// not spin the machine on its restarts.
const hogRestartPause = 100 * time.Millisecond

// startHogs starts n hogs, each in its own process group, killed with
// this process (Pdeathsig).
func startHogs(n int) (*hogPool, error) {
	p := &hogPool{cmds: make([]*exec.Cmd, n)}
	if n == 0 {
		return p, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot start CPU hogs: %v", err)
	}
	p.exe = exe
	for i := range n {
		c, err := p.spawn()
		if err != nil {
			p.stop()
			return nil, fmt.Errorf("cannot start CPU hogs: %v", err)
		}
		p.mu.Lock()
		p.cmds[i] = c
		p.mu.Unlock()
		p.wg.Add(1)
		go p.keep(i, c)
	}
	return p, nil
}

func (p *hogPool) spawn() (*exec.Cmd, error) {
	c := exec.Command(p.exe, "spin")
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return c, c.Start()
}

// keep waits for hog i (c) and starts it again when it dies, until stop.
func (p *hogPool) keep(i int, c *exec.Cmd) {
	defer p.wg.Done()
	for {
		err := c.Wait()
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			return
		}
		if p.first == "" {
			p.first = fmt.Sprintf("%v", err)
		}
		p.mu.Unlock()
		time.Sleep(hogRestartPause)
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			return
		}
		next, err := p.spawn()
		if err != nil {
			p.lost++
			p.first += fmt.Sprintf("; starting one again failed: %v", err)
			p.mu.Unlock()
			return
		}
		p.restarts++
		p.cmds[i] = next
		p.mu.Unlock()
		c = next
	}
}

// stop kills the hogs and waits for them.
func (p *hogPool) stop() {
	p.mu.Lock()
	p.stopped = true
	for _, c := range p.cmds {
		if c != nil && c.Process != nil {
			_ = c.Process.Kill()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// note says, for the soak's report, the hogs that died during it: ""
// when none did.
func (p *hogPool) note() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.lost > 0:
		return fmt.Sprintf("CPU hogs: %d died during the soak and could not be started again (%s): the runs after that ran beside fewer than asked; %d more were started again", p.lost, p.first, p.restarts)
	case p.restarts > 0:
		return fmt.Sprintf("CPU hogs: %d died during the soak (the first: %s) and were started again, each within %v", p.restarts, p.first, hogRestartPause+50*time.Millisecond)
	}
	return ""
}
