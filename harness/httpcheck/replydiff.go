package httpcheck

import (
	"fmt"
	"slices"
	"strconv"
)

// replyDiff says where a replayed JSON answer first differs from the
// key's first answer (b, then a): the path of the field and both
// values, "" when either is not JSON or they are the same value. Both
// bodies are clipped in a violation, and a replay with its fields in
// another order hid the one that differed (amount) past the clip.
func replyDiff(got, first string) string {
	vg, okg := jsonValue(got)
	vf, okf := jsonValue(first)
	if !okg || !okf {
		return ""
	}
	return valueDiff("", vg, vf)
}

// valueDiff is replyDiff on decoded values, at path.
func valueDiff(path string, got, first any) string {
	at := path
	if at == "" {
		at = "the body"
	}
	switch f := first.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(f))
		for k := range f {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := f[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := join(path, k)
			fv, inF := f[k]
			gv, inG := g[k]
			switch {
			case !inG:
				return fmt.Sprintf("%s is missing (first answer: %s)", p, show(fv))
			case !inF:
				return fmt.Sprintf("%s is new (%s), not in the first answer", p, show(gv))
			}
			if d := valueDiff(p, gv, fv); d != "" {
				return d
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok {
			break
		}
		for i := range min(len(f), len(g)) {
			if d := valueDiff(path+"["+strconv.Itoa(i)+"]", g[i], f[i]); d != "" {
				return d
			}
		}
		if len(f) != len(g) {
			return fmt.Sprintf("%s has %d items, the first answer %d", at, len(g), len(f))
		}
		return ""
	}
	if sameValue(got, first) {
		return ""
	}
	return fmt.Sprintf("%s is %s, the first answer's %s", at, show(got), show(first))
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// show is a decoded JSON value as JSON, clipped.
func show(v any) string {
	switch v := v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return fmt.Sprintf("a list of %d", len(v))
	case string:
		return clip(strconv.Quote(v))
	case nil:
		return "null"
	}
	return clip(fmt.Sprint(v))
}
