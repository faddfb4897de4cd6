package servers

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// CloseAll removes every container this process started and has not closed,
// including ones still starting (their Start fails). It is meant for a
// CLI's SIGINT/SIGTERM handler, or for the end of main.
func CloseAll(ctx context.Context) error {
	reg.Lock()
	servers := make([]*Server, 0, len(reg.live))
	for s := range reg.live {
		servers = append(servers, s)
	}
	for _, b := range reg.pending {
		b.Store(true)
	}
	reg.Unlock()

	var errs []error
	for _, s := range servers {
		if err := s.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	// Containers created but not yet handed back by testcontainers.
	if cli, err := dockerClient(); err == nil {
		if _, err := removeLabelled(ctx, cli, LabelSession+"="+session); err != nil {
			errs = append(errs, err)
		}
		// The networks of replicated topologies, once their containers are gone.
		if err := removeNetworks(ctx, cli, func(labels map[string]string) bool { return labels[LabelSession] == session }); err != nil {
			errs = append(errs, err)
		}
		_ = cli.Close()
	}
	return errors.Join(errs...)
}

// Reap removes containers left by idemcheck runs that were killed before
// they could clean up: containers labelled idemcheck=1 whose owning process,
// on this host, is gone. Containers of live processes and of other hosts
// sharing the daemon are left alone. It returns how many it removed. Start
// calls it once per process.
func Reap(ctx context.Context) (int, error) {
	cli, err := dockerClient()
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	return reap(ctx, cli)
}

func reap(ctx context.Context, cli *client.Client) (int, error) {
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelManaged+"=1"),
	})
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, c := range res.Items {
		if c.Labels[LabelSession] == session || ownerAlive(c.Labels[LabelOwner]) {
			continue
		}
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove %s: %w", shortID(c.ID), err))
			continue
		}
		n++
	}
	dead := func(labels map[string]string) bool {
		return labels[LabelSession] != session && !ownerAlive(labels[LabelOwner])
	}
	if err := removeNetworks(ctx, cli, dead); err != nil {
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// removeNetworks removes the networks labelled idemcheck=1 for which
// which says yes (a network some container still uses stays).
func removeNetworks(ctx context.Context, cli *client.Client, which func(labels map[string]string) bool) error {
	res, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", LabelManaged+"=1")})
	if err != nil {
		return err
	}
	var errs []error
	for _, nw := range res.Items {
		if !which(nw.Labels) {
			continue
		}
		if _, err := cli.NetworkRemove(ctx, nw.ID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove network %s: %w", nw.Name, err))
		}
	}
	return errors.Join(errs...)
}

// removeLabelled force-removes all containers carrying label (k=v).
func removeLabelled(ctx context.Context, cli *client.Client, label string) (int, error) {
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", label),
	})
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, c := range res.Items {
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove %s: %w", shortID(c.ID), err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// owner is this process as "host/pid/start/pidns", start being the
// process start time from /proc and pidns its PID namespace (each empty
// where there is none). A CI job in a container of its own (the host's
// network, so its hostname, and the host's Docker socket) numbers its
// processes apart from the host's: a pid is only this process's within
// its namespace.
func owner() string {
	host, _ := os.Hostname()
	pid := os.Getpid()
	return url.PathEscape(host) + "/" + strconv.Itoa(pid) + "/" + procStart(pid) + "/" + pidNamespace()
}

// ownerAlive reports whether the process named by an owner label may still
// run: it is on this host, in this PID namespace, its pid exists and its
// start time matches. Unparseable labels, other hosts and other PID
// namespaces count as alive (left alone: their processes cannot be seen
// from here). A label of three fields, written before the namespace was,
// is judged without it.
func ownerAlive(label string) bool {
	parts := strings.Split(label, "/")
	if len(parts) != 3 && len(parts) != 4 {
		return true
	}
	host, _ := os.Hostname()
	if parts[0] != url.PathEscape(host) {
		return true
	}
	if len(parts) == 4 && parts[3] != pidNamespace() {
		return true
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return true
	}
	if _, err := os.Stat("/proc/" + parts[1]); err != nil {
		if _, err := os.Stat("/proc/self"); err != nil {
			return true // no /proc here: cannot tell
		}
		return false
	}
	return parts[2] == "" || procStart(pid) == parts[2]
}

// pidNamespace is this process's PID namespace, the inode number in
// /proc/self/ns/pid ("pid:[4026531836]"), or "" where there is none.
func pidNamespace() string {
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]")
}

// procStart returns field 22 of /proc/PID/stat (start time in clock ticks).
func procStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	// After "pid (comm)", fields start at 3 (state); starttime is field 22.
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

func isNotFound(err error) bool {
	return cerrdefs.IsNotFound(err) || strings.Contains(err.Error(), "No such container")
}
