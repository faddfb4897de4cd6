package main

import (
	"fmt"
	"io"

	"github.com/idemcheck/idemcheck/internal/buildinfo"
)

const versionHelp = `Usage: idemcheck version

Prints this build's version, the commit it was built from ("+dirty" when
the tree had uncommitted changes) and the Go version.
`

func cmdVersion(args []string, stdout io.Writer) error {
	fs := newFlagSet("version", versionHelp)
	if err := parse(fs, versionHelp, args, stdout); err != nil {
		return err
	}
	fmt.Fprintln(stdout, buildinfo.Get())
	return nil
}
