package main

import (
	"path/filepath"
	"testing"
	"time"
)

// TestHTTPDirsOfOneMillisecond: black-box runs started in one millisecond
// without --out get a directory each, the later a millisecond on: they
// shared one, each writing over the other's files.
func TestHTTPDirsOfOneMillisecond(t *testing.T) {
	root := t.TempDir()
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	a, err := newHTTPDir(root, at)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newHTTPDir(root, at)
	if err != nil {
		t.Fatal(err)
	}
	if a == b || filepath.Base(a) != "http-20261207-100000.000" || filepath.Base(b) != "http-20261207-100000.001" {
		t.Fatalf("two runs in one millisecond: %s and %s", a, b)
	}
}
