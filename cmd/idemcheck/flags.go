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

// parse parses args; --help prints the command's help and flags to out.
func parse(fs *flag.FlagSet, help string, args []string, out io.Writer) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(out, help)
		fmt.Fprintln(out, "\nFlags:")
		fs.SetOutput(out)
		fs.PrintDefaults()
		return errHelp
	}
	if err != nil {
		return usagef("%s: %v", fs.Name(), strings.TrimSpace(err.Error()))
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}
