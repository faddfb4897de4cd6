package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// errHelp: --help was asked for and printed; exit 0.
var errHelp = errors.New("help printed")

// newFlagSet makes a flag set that reports errors as one line instead of
// printing the usage, and prints help on --help.
func newFlagSet(name, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	_ = help
	return fs
}

// parse parses args, which take no positional argument; --help prints the
// command's help and flags to out.
func parse(fs *flag.FlagSet, help string, args []string, out io.Writer) error {
	pos, err := parseArgs(fs, help, args, out, 0)
	if err == nil && len(pos) > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), pos[0])
	}
	return err
}

// parseArgs parses args with flags before or after the positional
// arguments (as a person types them: `demo --store redis split-claim` or
// `demo split-claim --store redis`), and returns the positional ones; more
// than max of them is an error. "--" ends the flags.
func parseArgs(fs *flag.FlagSet, help string, args []string, out io.Writer, max int) ([]string, error) {
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(out, help)
			fmt.Fprintln(out, "\nFlags:")
			fs.SetOutput(out)
			fs.PrintDefaults()
			return nil, errHelp
		}
		if err != nil {
			return nil, usagef("%s: %v", fs.Name(), strings.TrimSpace(err.Error()))
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" { // everything after -- is positional
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if len(pos) > max {
		return nil, usagef("%s: unexpected argument %q", fs.Name(), pos[max])
	}
	return pos, nil
}

// seedsFlag is --seeds, with one meaning in every command: "N" runs N
// consecutive seeds from --seed, "A-B" runs seeds A to B. Naming --seed
// beside a range is refused: the range names its first seed, and --seed
// would otherwise be silently ignored.
type seedsFlag struct {
	set      bool
	from, to int64 // a range
	n        int   // a count
	text     string
}

// seedsHelp is --seeds' usage line.
const seedsHelp = `N consecutive seeds from --seed, or a range A-B`

func (s *seedsFlag) String() string { return s.text }

func (s *seedsFlag) Set(v string) error {
	s.set, s.text = true, v
	m := seedRange.FindStringSubmatch(v)
	if m == nil {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return fmt.Errorf("--seeds wants a count of seeds (at least 1) or a range like 1-10 (of negative seeds, -5--1), got %q", v)
		}
		s.n = n
		return nil
	}
	from, err1 := strconv.ParseInt(m[1], 10, 64)
	to, err2 := strconv.ParseInt(m[2], 10, 64)
	switch {
	case err1 != nil || err2 != nil:
		return fmt.Errorf("--seeds %q: a seed must be an integer of 64 bits", v)
	case from > to:
		return fmt.Errorf("--seeds wants a range whose first seed is no greater than its last, got %q", v)
	}
	s.from, s.to = from, to
	return nil
}

// seedRange is a range of seeds, each of which may be negative: "1-10",
// "-5--1", "-2-3" ("-3--1" was read as a count, and refused as a range
// whose first was greater than its last).
var seedRange = regexp.MustCompile(`^\s*(-?[0-9]+)\s*-\s*(-?[0-9]+)\s*$`)

// resolve gives the first seed and how many, from --seed (seed; seedSet
// when given) and --seeds (def seeds when not given); at most max.
func (s *seedsFlag) resolve(seed int64, seedSet bool, def, max int) (first int64, n int, err error) {
	switch {
	case !s.set:
		first, n = seed, def
	case s.n > 0:
		first, n = seed, s.n
	case seedSet:
		return 0, 0, usagef("--seed %d and --seeds %s: give one (the range names its first seed), or --seeds N for N seeds from --seed", seed, s.text)
	default:
		if s.to-s.from >= int64(max) {
			return 0, 0, usagef("--seeds %s: at most %d seeds at once", s.text, max)
		}
		first, n = s.from, int(s.to-s.from)+1
	}
	if n > max {
		return 0, 0, usagef("--seeds %d: at most %d seeds at once", n, max)
	}
	if first > math.MaxInt64-int64(n-1) {
		// The seeds would wrap round to the most negative (a soak ran
		// seed -9223372036854775808 after the largest, and lab ran none
		// and panicked).
		return 0, 0, usagef("--seed %d with %d seeds runs past the largest seed (%d)", first, n, int64(math.MaxInt64))
	}
	return first, n, nil
}

// given reports whether the named flag was on the command line.
func given(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// shardFlag is --shard i/n, with one meaning in every command that takes
// it: of the command's whole job, a list of work items in a fixed order
// (mutants, seed × scenario runs, generated mutants), shard i of n does
// the items at positions p with p mod n = i-1. The n shards are disjoint
// and together are the whole job, whatever the job's size, and each shard
// knows its items without talking to the others: they can run on separate
// machines, and `idemcheck merge` joins their reports.
type shardFlag struct {
	Index, Of int // 1-based; Of 0: not sharded
}

// shardHelp is --shard's usage line. Its one back-quoted word is the
// value's name in the flag list ("-shard i/n"): the flag package takes the
// first back-quoted word of a usage line for it, so a command name quoted
// so printed as "-shard idemcheck merge".
const shardHelp = "do only shard `i/n` of the work (1 ≤ i ≤ n); 'idemcheck merge' joins the shards' --json reports"

func (s *shardFlag) String() string {
	if s.Of == 0 {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Of)
}

func (s *shardFlag) Set(v string) error {
	a, b, ok := strings.Cut(v, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n || n > 1000 {
		return fmt.Errorf("--shard wants i/n with 1 ≤ i ≤ n ≤ 1000, got %q", v)
	}
	s.Index, s.Of = i, n
	return nil
}

// owns reports whether work item p (0-based, in the job's fixed order)
// is this shard's; every item is an unsharded run's.
func (s shardFlag) owns(p int) bool { return s.Of == 0 || p%s.Of == s.Index-1 }

// say tells, under a shard's report, that its verdict is of its share of
// the work alone: a shard of a store's mutants printed "PASS: 3 of 3
// mutants killed" of a store that has 8.
func (s shardFlag) say(w io.Writer, command string) {
	if s.Of == 0 {
		return
	}
	fmt.Fprintf(w, "shard %s: the verdict above is of this shard's share of the %s run only; 'idemcheck merge' of every shard's --json report gives the run's\n", s.String(), command)
}

// info is what the shard's --json report carries for the merge: which
// shard, of which command, with which other arguments.
func (s shardFlag) info(command string, args []string, interrupted bool) *shardInfo {
	if s.Of == 0 {
		return nil
	}
	return &shardInfo{Command: command, Index: s.Index, Of: s.Of, Args: unsharded(args), Interrupted: interrupted}
}

// recoveredShard is the shard a run recovered from its journal was, read
// from the command line its journal's head keeps (argv: idemcheck, the
// command, its arguments), as shardFlag.info gives it for a run cut
// short; nil for an unsharded run. A shard killed at a CI job's time
// limit, recovered by recheck, is then merged with the others: its
// report carried no shard, and merge refused it.
func recoveredShard(argv []string) *shardInfo {
	if len(argv) < 2 {
		return nil
	}
	cmd, args := argv[1], argv[2:]
	var s shardFlag
	for i := 0; i < len(args); i++ {
		if !strings.HasPrefix(args[i], "-") {
			continue
		}
		name, v, has := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if name != "shard" {
			continue
		}
		if !has && i+1 < len(args) {
			i++
			v = args[i]
		}
		if s.Set(v) != nil {
			return nil
		}
	}
	return s.info(cmd, args, true)
}

// unsharded is args without --shard and --json, and without the flags
// that say where and how fast a shard runs, not what it runs (placement):
// what must be the same in every shard of one job. A CI job's runners
// each write to a path of their own, and may run at their own
// parallelism; merge refused such shards.
func unsharded(args []string) []string {
	out := []string{}
	for i := 0; i < len(args); i++ {
		a := strings.TrimLeft(args[i], "-")
		name, _, hasValue := strings.Cut(a, "=")
		switch {
		case (a == "shard" || placement[a]) && i+1 < len(args):
			i++
		case name == "shard" || placement[name] && hasValue, a == "json", a == "json=true":
		default:
			out = append(out, args[i])
		}
	}
	return out
}

// placement are the flags, each with a value, that say where a run
// writes and how much of the machine it takes, never which work it does:
// shards of one job may differ in them.
var placement = map[string]bool{"out": true, "keep": true, "junit": true, "parallel": true, "workers": true, "max-memory": true}

// printJSON writes v to w as indented JSON, the --json output of every
// command.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// bytesFlag is a memory size: a number of bytes with an optional unit
// (KB, MB, GB, TB: powers of 1024), e.g. 512MB or 4GB; 0 means none.
type bytesFlag uint64

func (b *bytesFlag) String() string {
	switch v := uint64(*b); {
	case v == 0:
		return "0"
	case v%(1<<30) == 0:
		return fmt.Sprintf("%dGB", v>>30)
	case v%(1<<20) == 0:
		return fmt.Sprintf("%dMB", v>>20)
	}
	return fmt.Sprintf("%.1fGB", float64(*b)/(1<<30))
}

func (b *bytesFlag) Set(v string) error {
	s := strings.ToUpper(strings.TrimSpace(v))
	mult := uint64(1)
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"TB", 1 << 40}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	// Not NaN, and a size of at least a byte or none at all (0): a
	// fraction of a byte was read as 0, no limit, the opposite of asked.
	if err != nil || math.IsNaN(n) || n < 0 || n*float64(mult) >= 1<<63 || n != 0 && n*float64(mult) < 1 {
		return fmt.Errorf("want a size such as 512MB or 4GB (0: no limit), got %q", v)
	}
	*b = bytesFlag(n * float64(mult))
	return nil
}
