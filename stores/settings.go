package stores

import (
	"fmt"
	"strings"
)

// SettingsStatement is the statement name under which a backend made of
// statements passes its session or client settings through
// Config.Statements at open: one `name = value` a line, in the order the
// backend applies them. The settings are the store's as much as its SQL
// is: the statements of the Postgres store rely on READ COMMITTED, its
// promises on synchronous commits, the Redis store's on a client that
// never resends a script. Passing them through the hook lets `idemcheck
// mutate` try each as a deployment may have it instead (another
// isolation level, weaker durability, a client library's retries) with
// the store's code unchanged.
const SettingsStatement = "settings"

// Setting is one line of a settings statement.
type Setting struct{ Name, Value string }

// Settings passes ss through the statement hook as the statement
// [SettingsStatement] and returns the settings to apply: ss itself when
// no hook is set, else the hooked text parsed again. A hooked text that
// does not parse, or names a setting ss does not, is an error: the store
// must not open with settings it would silently drop.
func (c Config) Settings(ss []Setting) ([]Setting, error) {
	if !c.Hooked() {
		return ss, nil
	}
	out, err := ParseSettings(c.Statement(SettingsStatement, FormatSettings(ss)))
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, s := range ss {
		known[s.Name] = true
	}
	for _, s := range out {
		if !known[s.Name] {
			return nil, fmt.Errorf("settings: unknown setting %q", s.Name)
		}
	}
	return out, nil
}

// FormatSettings writes ss as a settings statement: `name = value` lines.
func FormatSettings(ss []Setting) string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "%s = %s\n", s.Name, s.Value)
	}
	return b.String()
}

// ParseSettings reads a settings statement: `name = value` lines (spaces
// around both trimmed), blank lines and lines starting with # skipped.
func ParseSettings(text string) ([]Setting, error) {
	var out []Setting
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" || value == "" {
			return nil, fmt.Errorf("settings: line %d: want `name = value`, got %q", i+1, line)
		}
		out = append(out, Setting{Name: name, Value: value})
	}
	return out, nil
}

// SettingValue is the value of the named setting in ss, or "" if absent.
func SettingValue(ss []Setting, name string) string {
	for _, s := range ss {
		if s.Name == name {
			return s.Value
		}
	}
	return ""
}
