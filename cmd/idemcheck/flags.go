package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
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
