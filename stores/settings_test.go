package stores_test

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/stores"
)

// TestSettings: without a hook the settings are the backend's own; a
// hook or an Edit sees them as one `name = value` text and its change is
// what the backend applies; a text that does not parse, or names a
// setting the backend does not have, refuses to open.
func TestSettings(t *testing.T) {
	own := []stores.Setting{{Name: "synchronous_commit", Value: "on"}, {Name: "max_retries", Value: "-1"}}
	got, err := stores.Config{}.Settings(own)
	if err != nil || len(got) != 2 || got[0] != own[0] {
		t.Fatalf("no hook: %v, %v", got, err)
	}
	text := stores.FormatSettings(own)
	if text != "synchronous_commit = on\nmax_retries = -1\n" {
		t.Fatalf("format: %q", text)
	}
	edit := &stores.Edit{Statement: stores.SettingsStatement, Orig: text, Text: strings.Replace(text, "= on", "= off", 1)}
	got, err = stores.Config{Edit: edit}.Settings(own)
	if err != nil || stores.SettingValue(got, "synchronous_commit") != "off" || stores.SettingValue(got, "max_retries") != "-1" {
		t.Fatalf("edited: %v, %v", got, err)
	}
	// An edit made from another text leaves the settings alone.
	stale := &stores.Edit{Statement: stores.SettingsStatement, Orig: "x = y\n", Text: "synchronous_commit = off\n"}
	if got, err = (stores.Config{Edit: stale}).Settings(own); err != nil || stores.SettingValue(got, "synchronous_commit") != "on" {
		t.Fatalf("stale edit: %v, %v", got, err)
	}
	for _, bad := range []string{"synchronous_commit off\n", "fsync = off\n", "= on\n"} {
		hook := func(name, _ string) string { return bad }
		if _, err := (stores.Config{Statements: hook}).Settings(own); err == nil {
			t.Errorf("%q: opened", bad)
		}
	}
}
