package servers

import (
	"github.com/idemcheck/idemcheck/faults/netfault"
	"github.com/idemcheck/idemcheck/harness/nemesis"
)

// Network is the nemesis.Network of a backend's servers: an embedded
// toxiproxy proxy (faults/netfault) in front of the server a store
// address reaches. backend is "postgres" (addresses are DSNs) or "redis"
// (host:port or a URL).
func Network(backend string) nemesis.Network { return proxies(backend) }

type proxies string

// Proxy starts a proxy in front of the server addr reaches.
func (n proxies) Proxy(name, addr string) (nemesis.Proxy, string, error) {
	p, via, err := netfault.StartFor(name, string(n), addr)
	if err != nil {
		return nil, "", err
	}
	return p, via, nil
}
