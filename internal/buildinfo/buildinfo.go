// Package buildinfo says which build of idemcheck is running: the module
// version, the VCS commit it was built from (and whether the tree had
// uncommitted changes), and the Go version, from the binary's build
// information. A run records it in summary.json, so a result can be traced
// to the code that produced it.
package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// Info is one build's identity.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Modified  bool   `json:"modified,omitempty"`
	Time      string `json:"time,omitempty"`
	GoVersion string `json:"go_version"`
}

// Get reads the running binary's build information. Fields the build did
// not record (a test binary has no VCS stamp) are "unknown".
func Get() Info {
	info := Info{Version: "unknown", Commit: "unknown", GoVersion: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	info.GoVersion = bi.GoVersion
	if v := bi.Main.Version; v != "" {
		info.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		case "vcs.time":
			info.Time = s.Value
		}
	}
	return info
}

// Revision is the commit, with "+dirty" when the tree had changes: what a
// result records to say which code produced it.
func (i Info) Revision() string {
	if i.Modified {
		return i.Commit + "+dirty"
	}
	return i.Commit
}

// String prints the build on one line: version, revision, Go version.
func (i Info) String() string {
	return fmt.Sprintf("idemcheck %s (commit %s, %s)", i.Version, i.Revision(), i.GoVersion)
}
