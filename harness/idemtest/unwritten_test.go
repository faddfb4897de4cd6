package idemtest_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// TestUnwrittenKeepsTheVerdict: a scenario whose files cannot be written
// (a file-size limit, `ulimit -f`, which fails writes as a full disk
// does) failed a correct store with its write error and a hint about
// its lease, and its verdict was lost (its directory's last word was
// left blank, so recheck took it for a run whose process died: it is
// written now, report.WriteEnded). The verdict stands, the error a note.
func TestUnwrittenKeepsTheVerdict(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		idemtest.Run(t, idemtest.Factory{Name: "memory", Clock: stores.CallerClock,
			Open: func(cfg stores.Config) (stores.Store, error) { return memory.New(cfg) }})
		return
	}
	res := t.TempDir()
	// 40 blocks of 512 bytes: below what abuse's journal and history
	// need, above the last word's room; 1 block: not even the room (a
	// disk full before the run: every scenario failed unrun).
	for _, blocks := range []int{40, 1} {
		cmd := exec.Command("sh", "-c", fmt.Sprintf(`ulimit -f %d && exec "$0" -test.run='^TestUnwrittenKeepsTheVerdict$/^abuse$' -test.v -rapid.nofailfile`, blocks), os.Args[0])
		cmd.Env = append(withoutEnv(idemtest.RequireJudgedEnv), childEnv+"=1", "IDEM_RESULTS="+res)
		out, err := cmd.CombinedOutput()
		text := string(out)
		if err != nil || !strings.Contains(text, "--- PASS: TestUnwrittenKeepsTheVerdict/abuse") || !strings.Contains(text, "could not all be written") ||
			strings.Contains(text, "declare them") {
			t.Fatalf("%d blocks: want abuse passed, its unwritten files a note: %v\n%s", blocks, err, text)
		}
	}
	// A pass removes its directory, whole or not.
	if dirs, _ := filepath.Glob(filepath.Join(res, "2*")); len(dirs) != 0 {
		t.Errorf("run directories %v left by a pass", dirs)
	}
}
