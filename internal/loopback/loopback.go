// Package loopback picks ports on 127.0.0.1 for servers this process
// starts: the store servers of harness/servers on the host network, and
// the service instances of the black-box mode.
package loopback

import "net"

// FreePort asks the kernel for a port on 127.0.0.1 that nothing listens
// on now. Another process may take it before the caller's server binds
// it: a caller tries again when its server says the address is in use.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
