package servers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/client"
)

// noPull remembers images whose pull failed: registries don't come back
// during one run, and each probe costs time.
var noPull sync.Map // image -> error

// chooseImage picks the image to run: an explicit one (Options.Image or the
// IDEM_*_IMAGE variable), else the official image if present or pullable,
// else the local image.
func chooseImage(ctx context.Context, cli *client.Client, kind Kind, opts Options) (string, error) {
	facts := kinds[kind]
	official, local := facts.officialImage, facts.localImage
	explicit := opts.Image
	if explicit == "" {
		explicit = os.Getenv(facts.envImage)
	}
	if explicit != "" {
		if err := ensureImage(ctx, cli, explicit, opts.Logf); err != nil {
			return "", errorf(kind, true, "image %s not found: run `make images`, or set %s (%v)", explicit, facts.envAddr, err)
		}
		return explicit, nil
	}
	if err := ensureImage(ctx, cli, official, opts.Logf); err == nil {
		return official, nil
	} else if opts.Logf != nil {
		opts.Logf("servers: %s unavailable (%v); trying %s", official, err, local)
	}
	if present(ctx, cli, local) {
		return local, nil
	}
	return "", errorf(kind, true, "image %s not found: run `make images`, or set %s", local, facts.envAddr)
}

// present reports whether img is in the daemon's image store.
func present(ctx context.Context, cli *client.Client, img string) bool {
	_, err := cli.ImageInspect(ctx, img)
	return err == nil
}

// ensureImage makes img present locally, pulling it if a registry answers
// within pullAnswerTimeout (a pull that has started may take as long as ctx
// allows). Failed pulls are remembered for the rest of the process.
func ensureImage(ctx context.Context, cli *client.Client, img string, logf func(string, ...any)) error {
	if present(ctx, cli, img) {
		return nil
	}
	if err, ok := noPull.Load(img); ok {
		return err.(error)
	}
	err := pull(ctx, cli, img, logf)
	if err != nil {
		noPull.Store(img, err)
	}
	return err
}

func pull(ctx context.Context, cli *client.Client, img string, logf func(string, ...any)) error {
	t0 := time.Now()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answered := atomic.Bool{}
	timer := time.AfterFunc(pullAnswerTimeout, func() {
		if !answered.Load() {
			cancel()
		}
	})
	defer timer.Stop()
	resp, err := cli.ImagePull(pctx, img, client.ImagePullOptions{})
	if err == nil {
		defer resp.Close()
		for msg, merr := range resp.JSONMessages(pctx) {
			if merr != nil {
				err = merr
				break
			}
			if msg.Error != nil {
				err = msg.Error
				break
			}
			if !answered.Swap(true) && logf != nil {
				logf("servers: pulling %s", img)
			}
		}
	}
	if err != nil {
		if !answered.Load() && pctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("pull: no registry answered within %s", pullAnswerTimeout)
		}
		return fmt.Errorf("pull: %s", oneLine(err.Error()))
	}
	if !present(ctx, cli, img) {
		return errors.New("pull finished but the image is not there")
	}
	if logf != nil {
		logf("servers: pulled %s in %s", img, time.Since(t0).Round(time.Millisecond))
	}
	return nil
}
