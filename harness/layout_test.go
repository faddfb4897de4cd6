package harness_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/idemcheck/idemcheck/"

// heavy are the module prefixes of Docker, testcontainers, the database
// drivers and toxiproxy: only harness/servers (and the tests and programs
// that import it) may bring them in.
var heavy = []string{
	"github.com/docker/", "github.com/moby/", "github.com/testcontainers/",
	"github.com/jackc/pgx", "github.com/redis/go-redis", "github.com/Shopify/toxiproxy",
}

// light lists the packages that must not depend on heavy ones, even
// indirectly: the checking core, the traffic, the scenarios and what a
// store's author imports (idemtest).
var light = []string{
	"models", "stores", "faults", "harness/history", "harness/check", "harness/workload",
	"harness/worker", "harness/nemesis", "harness/scenario", "harness/sched", "harness",
	"harness/hunt", "harness/results", "harness/report", "harness/report/htmlreport", "harness/idemtest",
	"harness/httpload", "harness/httpfault", "harness/httpcheck", "harness/httpreport", "harness/mutate",
	"stores/execstore",
}

// roles says which of the harness's packages each one may import
// directly: the data flows workload → nemesis → history → check → report,
// and producers never import consumers, nor the reverse.
var roles = map[string][]string{
	"harness/history":           {},
	"harness/check":             {"harness/history"},
	"harness/workload":          {"harness/history"},
	"harness/worker":            {"harness/history", "harness/workload"},
	"harness/nemesis":           {"harness/history", "harness/workload", "harness/worker"},
	"harness/scenario":          {"harness/history", "harness/workload", "harness/worker", "harness/nemesis", "harness/sched"},
	"harness/results":           {"harness/history", "harness/check", "harness/scenario"},
	"harness":                   {"harness/history", "harness/check", "harness/workload", "harness/nemesis", "harness/scenario", "harness/results"},
	"harness/report":            {"harness/results", "harness/history", "harness/check"},
	"harness/report/htmlreport": {"harness/results", "harness/history", "harness/check"},
	"harness/hunt": {"harness", "harness/history", "harness/check", "harness/workload", "harness/scenario",
		"harness/sched", "harness/report"},
	"harness/mutate":   {"harness", "harness/hunt", "harness/scenario"},
	"harness/idemtest": {"harness", "harness/check", "harness/scenario", "harness/results", "harness/report", "harness/workload", "harness/nemesis"},
	// The black-box (HTTP) run: its traffic and provider, its faults, its
	// checkers and its report, in the same order.
	"harness/httpload":   {"harness/history"},
	"harness/httpfault":  {"harness/history", "harness/nemesis"},
	"harness/httpcheck":  {"harness/history"},
	"harness/httpreport": {"harness/history", "harness/httpcheck"},
}

type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// goList runs go with args in the module's root and returns its output;
// a failure fails t with go's own words.
func goList(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// golist lists the packages (module-relative) with their imports and deps.
func golist(t *testing.T, pkgs []string) map[string]listed {
	t.Helper()
	args := []string{"list", "-json=ImportPath,Imports,Deps"}
	for _, p := range pkgs {
		args = append(args, module+p)
	}
	out := goList(t, args...)
	got := map[string]listed{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var l listed
		if err := dec.Decode(&l); err != nil {
			t.Fatal(err)
		}
		got[strings.TrimPrefix(l.ImportPath, module)] = l
	}
	return got
}

// TestLayout enforces the import rule of docs/DESIGN.md §6: the light
// packages bring in no Docker, testcontainers, database driver or
// toxiproxy, and each harness package imports only the roles before it.
func TestLayout(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to list imports: %v", err)
	}
	got := golist(t, light)
	for _, p := range light {
		l, ok := got[p]
		if !ok {
			t.Errorf("go list did not list %s", p)
			continue
		}
		for _, h := range heavy {
			for _, d := range l.Deps {
				if strings.HasPrefix(d, h) {
					t.Errorf("%s depends on %s (and maybe more of %s)", p, d, h)
					break
				}
			}
		}
	}
	for p, allowed := range roles {
		l, ok := got[p]
		if !ok {
			t.Errorf("go list did not list %s", p)
			continue
		}
		for _, imp := range l.Imports {
			rel, ours := strings.CutPrefix(imp, module)
			if !ours || !(rel == "harness" || strings.HasPrefix(rel, "harness/")) {
				continue
			}
			if !slices.Contains(allowed, rel) {
				t.Errorf("%s imports %s: it may import only %v of the harness", p, rel, allowed)
			}
		}
	}
}

// maxFileLines is the longest a Go file may grow: past it, a file holds
// several concerns and is split along its seams (docs/DESIGN.md §6).
const maxFileLines = 600

// TestFilesAlongTheirSeams keeps every Go file of the module, tests
// included, at most maxFileLines long.
func TestFilesAlongTheirSeams(t *testing.T) {
	root := filepath.Join("..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "results" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := bytes.Count(b, []byte("\n")); n > maxFileLines {
			t.Errorf("%s has %d lines, more than %d: split it along its seams", path, n, maxFileLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRacePassLinksNoServers: the test binaries of make test's race pass
// (the Makefile's RACE_PKGS, built with -race) link none of the heavy
// modules: no Docker, testcontainers, toxiproxy or database driver. Their
// instrumented build was about half of the race pass's compiling on a
// fresh machine, and the tests that need a server run in the other pass
// (harnesstest provisions none under -race).
func TestRacePassLinksNoServers(t *testing.T) {
	pkgs := makeVar(t, "RACE_PKGS")
	if len(pkgs) == 0 {
		t.Fatal("RACE_PKGS lists no package")
	}
	out := goList(t, append([]string{"list", "-race", "-test", "-deps", "-f", "{{.ImportPath}}"}, pkgs...)...)
	seen := map[string]bool{}
	for dep := range strings.Lines(string(out)) {
		for _, h := range heavy {
			if strings.HasPrefix(dep, h) && !seen[h] {
				seen[h] = true
				t.Errorf("the race pass (%v) links %s (and maybe more of %s): move the test that needs it to a package of the other pass", pkgs, strings.TrimSpace(dep), h)
			}
		}
	}
}

// TestEveryLongPackageGetsASlot: make test's plain pass runs TEST_P test
// binaries at once, more than the FIRST_PKGS it starts first: a long
// package that waited for a slot ran a minute and more past the others.
func TestEveryLongPackageGetsASlot(t *testing.T) {
	first := makeVar(t, "FIRST_PKGS")
	p := makeVar(t, "TEST_P")
	if len(first) == 0 || len(p) != 1 {
		t.Fatalf("the Makefile's FIRST_PKGS %v, TEST_P %v", first, p)
	}
	if n, err := strconv.Atoi(p[0]); err != nil || n <= len(first) {
		t.Errorf("TEST_P is %s, want more than the %d FIRST_PKGS", p[0], len(first))
	}
}

// makeVar returns the words of the Makefile variable name (set with :=
// or ?=), continuation lines included; nil if it is not set.
func makeVar(t *testing.T, name string) []string {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var rest string
	for _, op := range []string{" :=", " ?="} {
		if _, r, ok := strings.Cut(string(mk), "\n"+name+op); ok {
			rest = r
			break
		}
	}
	if rest == "" {
		return nil
	}
	var words []string
	for line := range strings.Lines(rest) {
		line = strings.TrimSpace(line)
		cont := strings.HasSuffix(line, "\\")
		words = append(words, strings.Fields(strings.TrimSuffix(line, "\\"))...)
		if !cont {
			break
		}
	}
	return words
}
