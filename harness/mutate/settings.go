package mutate

import (
	"strings"

	"github.com/idemcheck/idemcheck/stores"
)

// weakerSettings are, by setting name, the values a deployment may run
// a store with instead of the one it asks for: each a real default or a
// common "tuning" whose cost shows only under contention, a crash or a
// lost reply. The names are those of the backends' settings statements
// (stores.SettingsStatement); a setting not listed here is not mutated.
var weakerSettings = map[string][]string{
	// Postgres: another isolation level (the statements rely on READ
	// COMMITTED; under the others a race's losers get 40001), and commits
	// acknowledged before they are on disk.
	"default_transaction_isolation": {"repeatable read", "serializable"},
	"synchronous_commit":            {"off"},
	// SQLite: no waiting for another writer, a rollback journal kept in
	// memory, no fsync, a transaction that takes its write lock only when
	// it first writes.
	"busy_timeout": {"0"},
	"journal_mode": {"MEMORY"},
	"synchronous":  {"OFF"},
	"transaction":  {"DEFERRED"},
	// go-redis: its default of three retries, which resend a script whose
	// reply was lost.
	"max_retries": {"3"},
}

// isSettings reports whether the statement is a backend's settings.
func isSettings(name string) bool { return name == stores.SettingsStatement }

// settingEdits are the edits of a settings statement: each setting's
// value replaced by each weaker value a deployment may have.
func settingEdits(src string) []edit {
	var out []edit
	at := 0
	for _, line := range strings.SplitAfter(src, "\n") {
		start := at
		at += len(line)
		rawName, rawValue, ok := strings.Cut(strings.TrimRight(line, "\n"), "=")
		name, v := strings.TrimSpace(rawName), strings.TrimSpace(rawValue)
		if !ok || v == "" || strings.HasPrefix(name, "#") {
			continue
		}
		vstart := start + len(rawName) + 1 + strings.Index(rawValue, v)
		for _, w := range weakerSettings[name] {
			if strings.EqualFold(w, v) {
				continue
			}
			out = append(out, edit{kind: WeakenSetting, start: vstart, end: vstart + len(v), repl: w,
				from: name + " = " + v, to: name + " = " + w})
		}
	}
	return out
}
