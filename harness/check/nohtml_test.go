package check_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCheckWritesNoHTML: the checkers judge and keep data; drawing a page
// is a report's (harness/report.WriteLinearization). No source file of the
// package (tests aside) calls porcupine's Visualize, writes an HTML
// document or imports an HTML package.
func TestCheckWritesNoHTML(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		read++
		src := strings.ToLower(string(b))
		for _, bad := range []string{"visualize(", "visualizepath(", "<html", "<!doctype"} {
			if strings.Contains(src, bad) {
				t.Errorf("%s holds %q: package check writes no HTML; a report draws the page", f, bad)
			}
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, b, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "html" || strings.HasPrefix(p, "html/") || p == "text/template" {
				t.Errorf("%s imports %s: package check writes no HTML", f, p)
			}
		}
	}
	if read == 0 {
		t.Fatal("found no source file of the package to read")
	}
}
