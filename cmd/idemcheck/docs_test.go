package main

import (
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The documentation's promises, kept by a test: a README short enough to
// read, links that lead somewhere, no count written out in prose (a count
// goes stale the day a checker, scenario or mutant is added), a top-level
// usage that names every command, and flag lists that print each flag's
// name as the flag package means to.

// readmeMaxLines is the README's length limit: the README says what the
// tool is and how to start; the rest is in docs/.
const readmeMaxLines = 200

// repoRoot is the module's root: the nearest directory above the test's
// with a go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// skipDir reports whether a directory holds no documentation or source of
// the project: run output, built binaries, git's own files.
func skipDir(root, path string) bool {
	rel, _ := filepath.Rel(root, path)
	switch rel {
	case ".git", "results", "bin":
		return true
	}
	return false
}

// repoFiles lists the repository's files whose names end with ext.
func repoFiles(t *testing.T, root, ext string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(root, path) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ext) {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// docFiles is README.md and every Markdown file under docs/.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	for _, f := range repoFiles(t, root, ".md") {
		if strings.HasPrefix(f, filepath.Join(root, "docs")+string(filepath.Separator)) {
			files = append(files, f)
		}
	}
	if len(files) < 2 {
		t.Fatalf("no Markdown files under %s/docs", root)
	}
	return files
}

func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to docs/", n, readmeMaxLines)
	}
}

// mdLink is a Markdown link or image: [text](target "title").
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// TestDocLinks: every relative link of README.md and docs/ names a file or
// directory of the repository. A link out of the repository (the lesson
// card beside a checkout) would not travel with a clone.
func TestDocLinks(t *testing.T) {
	root := repoRoot(t)
	checked := 0
	for _, f := range docFiles(t, root) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
				continue
			}
			target, anchor, _ := strings.Cut(target, "#")
			path := filepath.Join(filepath.Dir(f), filepath.FromSlash(target))
			rel, _ := filepath.Rel(root, f)
			if r, err := filepath.Rel(root, path); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
				t.Errorf("%s: link %q leaves the repository", rel, m[1])
				continue
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %q: %v", rel, m[1], err)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") {
				if !slices.Contains(headingAnchors(t, path), anchor) {
					t.Errorf("%s: link %q: no heading of %s has the anchor #%s", rel, m[1], target, anchor)
				}
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("found no relative link to check: the link pattern is broken")
	}
}

// headingAnchors lists the anchors GitHub gives a Markdown file's
// headings: lower case, punctuation dropped, spaces made hyphens.
func headingAnchors(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if fenced || !strings.HasPrefix(line, "#") || !ok {
			continue
		}
		var a strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				a.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				a.WriteRune(r)
			}
		}
		out = append(out, a.String())
	}
	return out
}

// forbiddenCount is the word that must appear in no doc, doc comment or
// help text: the count of checkers that went stale. Spelled in two pieces
// so that this file's own strings do not contain it.
var forbiddenCount = regexp.MustCompile(`(?i)\b` + "sev" + `en\b`)

// countedNoun is a number written as a word before what the registries
// hold: every such count in the docs goes stale when one is added.
var countedNoun = regexp.MustCompile(`(?i)\b(two|three|four|five|six|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen)\s+(checkers|scenarios|mutants|stores|backends|commands)\b`)

// TestDocsHaveNoStaleCounts: the forbidden count word appears in no
// Markdown file, Go comment or Go string of the repository, and README.md
// and docs/ count no checkers, scenarios, mutants, stores, backends or
// commands in words.
func TestDocsHaveNoStaleCounts(t *testing.T) {
	root := repoRoot(t)
	for _, f := range repoFiles(t, root, ".md") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for i, line := range strings.Split(string(b), "\n") {
			if forbiddenCount.MatchString(line) {
				t.Errorf("%s:%d: a count in words: %s", rel, i+1, line)
			}
		}
	}
	for _, f := range docFiles(t, root) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for i, line := range strings.Split(string(b), "\n") {
			if m := countedNoun.FindString(line); m != "" {
				t.Errorf("%s:%d: %q counts in words what the registries hold: name them, or link to idemcheck list", rel, i+1, m)
			}
		}
	}
	goFiles := repoFiles(t, root, ".go")
	if len(goFiles) < 10 {
		t.Fatalf("found %d Go files under %s", len(goFiles), root)
	}
	for _, f := range goFiles {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		fset := token.NewFileSet()
		file := fset.AddFile(f, fset.Base(), len(src))
		var s scanner.Scanner
		s.Init(file, src, nil, scanner.ScanComments)
		for {
			pos, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if (tok == token.COMMENT || tok == token.STRING) && forbiddenCount.MatchString(lit) {
				t.Errorf("%s:%d: a count in words in a comment or string", rel, fset.Position(pos).Line)
			}
		}
	}
}

// dispatched reads main.go's command switch: every command run dispatches
// (each case's first literal; the others are its aliases), and whether it
// is internal (a comment on the case's line says so).
func dispatched(t *testing.T) (public, internal []string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "main.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	internalLine := map[int]bool{}
	for _, cg := range f.Comments {
		if strings.Contains(cg.Text(), "internal") {
			internalLine[fset.Position(cg.Pos()).Line] = true
		}
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "run" {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			cc, ok := n.(*ast.CaseClause)
			if !ok || len(cc.List) == 0 {
				return true
			}
			lit, ok := cc.List[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			name, err := strconv.Unquote(lit.Value)
			if err != nil || strings.HasPrefix(name, "-") {
				return true
			}
			if internalLine[fset.Position(cc.Pos()).Line] {
				internal = append(internal, name)
			} else {
				public = append(public, name)
			}
			return true
		})
	}
	if len(public) < 5 {
		t.Fatalf("found only %v in main.go's switch: the parser's view of run is broken", public)
	}
	return public, internal
}

// TestUsageListsEveryCommand: the top-level usage has a line for every
// command main.go dispatches (the internal ones aside), the unknown-command
// error names each, and README.md shows each.
func TestUsageListsEveryCommand(t *testing.T) {
	public, internal := dispatched(t)
	_, usage, _ := runCLI(t, "help")
	_, _, unknown := runCLI(t, "no-such-command")
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range public {
		if !regexp.MustCompile(`(?m)^  idemcheck ` + regexp.QuoteMeta(c) + `\b`).MatchString(usage) {
			t.Errorf("the top-level usage has no line for %q:\n%s", c, usage)
		}
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(c) + `\b`).MatchString(unknown) {
			t.Errorf("the unknown-command error does not name %q: %s", c, unknown)
		}
		if c != "help" && !strings.Contains(string(readme), "idemcheck "+c) {
			t.Errorf("README.md does not show 'idemcheck %s'", c)
		}
	}
	for _, c := range internal {
		if strings.Contains(usage, "idemcheck "+c+" ") {
			t.Errorf("the top-level usage lists the internal command %q", c)
		}
	}
}

// flagLine is a flag's first line in a --help's flag list: its name and,
// when it takes one, the name of its value.
var flagLine = regexp.MustCompile(`^  -(\S+)(?: (.*))?$`)

// TestHelpFlagLines: in every command's --help, each flag's line is its
// name and at most one word for its value. The flag package takes a
// back-quoted word of the usage string for the value's name, so a usage
// that quotes a command in back-quotes prints a flag named like
// "-shard idemcheck merge".
func TestHelpFlagLines(t *testing.T) {
	public, _ := dispatched(t)
	for _, c := range public {
		if c == "help" {
			continue
		}
		code, out, _ := runCLI(t, c, "--help")
		if code != exitPass {
			t.Errorf("%s --help: exit %d", c, code)
		}
		if !strings.HasPrefix(out, "Usage: idemcheck "+c) {
			t.Errorf("%s --help does not begin with a Usage line: %q", c, firstLine(out))
		}
		_, flags, ok := strings.Cut(out, "\nFlags:\n")
		if !ok {
			t.Errorf("%s --help has no flag list", c)
			continue
		}
		for _, line := range strings.Split(flags, "\n") {
			m := flagLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			if strings.ContainsAny(m[2], " \t") {
				t.Errorf("%s --help: flag -%s prints its value's name as %q: a back-quoted phrase in its usage", c, m[1], m[2])
			}
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
