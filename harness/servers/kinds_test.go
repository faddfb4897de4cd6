package servers

import (
	"context"
	"reflect"
	"regexp"
	"testing"
)

// TestKindsComplete checks that every row of kinds has every fact, since
// the code calls them without looking (allowReplication alone may be
// missing), and that Start and StartReplicated refuse a kind without a row.
func TestKindsComplete(t *testing.T) {
	optional := map[string]bool{"allowReplication": true}
	for kind, facts := range kinds {
		v := reflect.ValueOf(facts)
		for i := range v.NumField() {
			if name := v.Type().Field(i).Name; v.Field(i).IsZero() && !optional[name] {
				t.Errorf("kinds[%s] has no %s", kind, name)
			}
		}
		if !kind.Known() {
			t.Errorf("%s is in kinds but not Known", kind)
		}
	}
	if !Postgres.Known() || !Redis.Known() || Kind("sqlite").Known() {
		t.Errorf("Known: postgres %v, redis %v, sqlite %v", Postgres.Known(), Redis.Known(), Kind("sqlite").Known())
	}
	const want = `servers: unknown kind "sqlite" (want postgres or redis)`
	if s, err := Start(context.Background(), "sqlite", Options{}); err == nil || err.Error() != want {
		t.Errorf("Start(sqlite) = %v, %v; want %s", s, err, want)
	}
	if top, err := StartReplicated(context.Background(), "sqlite", Options{}); err == nil || err.Error() != want {
		t.Errorf("StartReplicated(sqlite) = %v, %v; want %s", top, err, want)
	}
}

// TestPostgresReadyLog: the wait for a Postgres container's real server
// (postgresReady) matches the logs of every way it starts, whatever order
// Docker gave lines of stdout and stderr, and never the temporary server's
// ready line alone.
func TestPostgresReadyLog(t *testing.T) {
	const (
		ready  = "LOG:  database system is ready to accept connections\n"
		marker = "PostgreSQL init process complete; ready for start up.\n"
		skip   = "PostgreSQL Database directory appears to contain a database; Skipping initialization\n"
	)
	re := regexp.MustCompile(postgresReady)
	for _, c := range []struct {
		name, log string
		up        bool
	}{
		{"template cluster: marker, then the server's one ready line", marker + ready, true},
		{"initdb: temporary server, marker, server", ready + marker + ready, true},
		{"initdb, the marker logged after the server's ready line", ready + ready + marker, true},
		{"an existing cluster", skip + ready, true},
		{"the temporary server only", ready, false},
		{"the temporary server, then the marker", ready + marker, false},
		{"the marker alone", marker, false},
	} {
		if got := re.MatchString(c.log); got != c.up {
			t.Errorf("%s: matched %v, want %v", c.name, got, c.up)
		}
	}
}
