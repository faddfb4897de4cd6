package sqlite

import (
	"fmt"
	"strings"
)

// positional rewrites a statement's named parameters (:name, @name,
// $name) as anonymous ? parameters, and returns the names in the order
// they now bind. It is for Begin's read (replayOnRead), the hot read of a
// retry storm: with named parameters modernc.org/sqlite asks SQLite each
// parameter's name and makes a Go string of it on every call, and
// database/sql boxes each sql.NamedArg, about a fifth of the read's
// allocations; an anonymous ? costs neither. Quoted literals and
// identifiers ('…', "…") and comments are copied as they are: a colon
// there is not a parameter.
func positional(stmt string) (string, []string) {
	var b strings.Builder
	var names []string
	for i := 0; i < len(stmt); {
		j := i + 1
		switch c := stmt[i]; {
		case c == '\'' || c == '"': // to the closing quote; a doubled one is inside
			for j < len(stmt) && (stmt[j] != c || j+1 < len(stmt) && stmt[j+1] == c) {
				if stmt[j] == c {
					j++
				}
				j++
			}
			j = min(j+1, len(stmt))
		case strings.HasPrefix(stmt[i:], "--"):
			if k := strings.IndexByte(stmt[i:], '\n'); k >= 0 {
				j = i + k
			} else {
				j = len(stmt)
			}
		case strings.HasPrefix(stmt[i:], "/*"):
			if k := strings.Index(stmt[i+2:], "*/"); k >= 0 {
				j = i + 2 + k + 2
			} else {
				j = len(stmt)
			}
		case (c == ':' || c == '@' || c == '$') && j < len(stmt) && isNameStart(stmt[j]): // SQLite's three forms
			for j < len(stmt) && (isNameStart(stmt[j]) || stmt[j] >= '0' && stmt[j] <= '9') {
				j++
			}
			names = append(names, stmt[i+1:j])
			b.WriteByte('?')
			i = j
			continue
		}
		b.WriteString(stmt[i:j])
		i = j
	}
	return b.String(), names
}

func isNameStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// replayParam is one parameter of Begin's read, in the order it binds.
type replayParam uint8

const (
	paramTenant replayParam = iota
	paramKey
	paramFingerprint
	paramNow
	paramLockTTL
)

// replayParams maps the read's parameter names to what Begin binds
// there; a statement that names another (edited through the hook) is
// refused when the Store opens.
func replayParams(names []string) ([]replayParam, error) {
	known := map[string]replayParam{"tenant": paramTenant, "key": paramKey, "fingerprint": paramFingerprint, "now": paramNow, "lock_ttl": paramLockTTL}
	ps := make([]replayParam, len(names))
	for i, n := range names {
		p, ok := known[n]
		if !ok {
			return nil, fmt.Errorf("the replay statement names :%s; it may name :tenant, :key, :fingerprint, :now and :lock_ttl", n)
		}
		ps[i] = p
	}
	return ps, nil
}
