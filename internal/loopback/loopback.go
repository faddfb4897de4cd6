// Package loopback picks ports on 127.0.0.1 for servers this process
// starts: the store servers of harness/servers on the host network, and
// the service instances of the black-box mode.
package loopback

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// FreePort picks a port on 127.0.0.1 that nothing listens on now, for a
// server that binds it a moment later (a container, a service
// instance). Another process may still take it first: a caller tries
// again when its server says the address is in use.
//
// The port is drawn at random from below the kernel's ephemeral range
// (ip_local_port_range on Linux), where no process's bind to port 0 and
// no outgoing connection lands. A Listen on ":0" with SO_REUSEADDR, as
// Go's is, draws only odd ports from the range's lower half: about 7,000
// on Linux's default range, shared by every test server and relay of a
// busy `make test`. A port the kernel handed out and taken back was
// handed to another process in the seconds a container took to bind
// it. HashiCorp's sdk/freeport keeps out of that range for the same
// reason. Only where the range leaves too little room below it does the
// kernel pick.
func FreePort() (int, error) {
	lo, hi := block()
	if lo == 0 {
		return kernelPort()
	}
	return pickIn(lo, hi, rand.IntN)
}

const (
	// blockLow is the lowest port drawn: below it, well-known and
	// registered services crowd.
	blockLow = 10000
	// minBlock is the fewest ports worth drawing from; with fewer, two
	// processes picking at once would meet too often.
	minBlock = 1000
	// draws is how many ports FreePort tries before it gives up.
	draws = 64
	// remembered is how many ports this process handed out lately and
	// will not hand out again: two servers starting at once must not be
	// given the same port before either binds it.
	remembered = 256
)

var (
	blockOnce        sync.Once
	blockLo, blockHi int

	mu     sync.Mutex
	recent = map[int]bool{}
	order  []int
)

// block is the range FreePort draws from, [blockLow, the ephemeral
// range's start); 0, 0 when that is too small.
func block() (int, int) {
	blockOnce.Do(func() {
		// Linux's default start; BSDs, macOS and Windows start higher.
		ephemeral := 32768
		if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
			if f := strings.Fields(string(b)); len(f) == 2 {
				if n, err := strconv.Atoi(f[0]); err == nil {
					ephemeral = n
				}
			}
		}
		if ephemeral-blockLow >= minBlock {
			blockLo, blockHi = blockLow, ephemeral-1
		}
	})
	return blockLo, blockHi
}

// pickIn draws ports in [lo, hi] with draw until one was not handed out
// lately and can be listened on now.
func pickIn(lo, hi int, draw func(int) int) (int, error) {
	mu.Lock()
	defer mu.Unlock()
	for range draws {
		p := lo + draw(hi-lo+1)
		if recent[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ln.Close()
		recent[p] = true
		order = append(order, p)
		if len(order) > remembered {
			delete(recent, order[0])
			order = order[1:]
		}
		return p, nil
	}
	return 0, errors.New("no free port on 127.0.0.1 in " + strconv.Itoa(lo) + "-" + strconv.Itoa(hi) + " after " + strconv.Itoa(draws) + " tries")
}

// kernelPort asks the kernel for a port on 127.0.0.1 nothing listens on.
func kernelPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
