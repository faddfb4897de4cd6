package report

import (
	"strings"
	"testing"
	"time"
)

// TestEndedWord: the room alone reads as no word; a word with more and
// longer reasons than fit is cut to fit the room, and reads back.
func TestEndedWord(t *testing.T) {
	dir := t.TempDir()
	if err := ReserveEnd(dir); err != nil {
		t.Fatal(err)
	}
	if e, ok := ReadEnded(dir); ok {
		t.Fatalf("the room alone read as a word: %+v", e)
	}
	var why []string
	for range 10 {
		why = append(why, strings.Repeat("<no space left on device> ", 200))
	}
	if err := WriteEnded(dir, Ended{At: time.Now(), Verdict: "fail", Unwritten: why}); err != nil {
		t.Fatal(err)
	}
	e, ok := ReadEnded(dir)
	if !ok || e.Verdict != "fail" || len(e.Unwritten) != maxReasons || e.Unwritten[maxReasons-1] != "and more" {
		t.Fatalf("read back %v: %+v", ok, e)
	}
	DropEnded(dir)
	if _, ok := ReadEnded(dir); ok {
		t.Error("a dropped word still reads")
	}
}
