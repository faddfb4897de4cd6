package servers

import (
	"context"
	"reflect"
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
