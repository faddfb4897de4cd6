package postgres

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/stores"
)

// TestSettingsApplied: the session settings go through the statement hook
// (stores.SettingsStatement) and every session runs with what it returns;
// a synchronous_commit the DSN names is kept (remote_apply is stronger
// than the store's on).
func TestSettingsApplied(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	ctx := ctxT(t)
	show := func(s *Store, name string) string {
		var v string
		if err := s.pool.QueryRow(ctx, "SHOW "+name).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	open := func(dsn string, edit *stores.Edit) *Store {
		s, err := New(ctx, dsn, stores.Config{LockTTL: hour, Retention: hour, Namespace: freshNamespace(t, dsn), Edit: edit})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s := open(dsn, nil)
	if got := show(s, "synchronous_commit"); got != "on" {
		t.Errorf("correct store: synchronous_commit %s", got)
	}
	if got := show(s, "transaction_isolation"); got != "read committed" {
		t.Errorf("correct store: isolation %s", got)
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	if got := show(open(dsn+sep+"synchronous_commit=remote_apply", nil), "synchronous_commit"); got != "remote_apply" {
		t.Errorf("DSN's remote_apply: synchronous_commit %s", got)
	}
	orig := stores.FormatSettings([]stores.Setting{{Name: "default_transaction_isolation", Value: "read committed"}, {Name: "synchronous_commit", Value: "on"}})
	m := open(dsn, &stores.Edit{Statement: stores.SettingsStatement, Orig: orig, Text: strings.Replace(orig, "= on", "= off", 1)})
	if got := show(m, "synchronous_commit"); got != "off" {
		t.Errorf("edited store: synchronous_commit %s", got)
	}
}
