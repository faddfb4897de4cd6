package sqlite

import (
	"context"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/stores"
)

// TestSettingsApplied: the connection settings go through the statement
// hook (stores.SettingsStatement) and every connection runs with what it
// returns: a generated mutant of them (idemcheck mutate's weaken-setting)
// changes the database's behaviour, not only a text.
func TestSettingsApplied(t *testing.T) {
	ctx := context.Background()
	pragma := func(s *Store, name string) string {
		var v string
		if err := s.db.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return strings.ToLower(v)
	}
	s := open(t, stores.Correct)
	if got := pragma(s, "journal_mode"); got != "wal" {
		t.Fatalf("correct store: journal_mode %s", got)
	}
	if got := pragma(s, "synchronous"); got != "2" { // FULL
		t.Fatalf("correct store: synchronous %s", got)
	}
	orig := stores.FormatSettings(settings(BusyTimeout))
	cfg := testConfig(stores.Correct)
	cfg.Edit = &stores.Edit{Statement: stores.SettingsStatement, Orig: orig,
		Text: strings.NewReplacer("= WAL", "= MEMORY", "= FULL", "= OFF").Replace(orig)}
	m, err := New(ctx, dbPath(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := pragma(m, "journal_mode"); got != "memory" {
		t.Errorf("edited store: journal_mode %s", got)
	}
	if got := pragma(m, "synchronous"); got != "0" { // OFF
		t.Errorf("edited store: synchronous %s", got)
	}
}
