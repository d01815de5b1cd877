package main

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// version describes the build from its build info: the module's version
// ("(devel)" for a build from a work tree), the VCS revision and time the
// go command stamped, "modified" when the tree had changes, and the Go
// release.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "starwire (no build info) " + runtime.Version()
	}
	return formatVersion(bi)
}

func formatVersion(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	parts := []string{"starwire " + v}
	if bi.Main.Path != "" {
		parts[0] += " (" + bi.Main.Path + ")"
	}
	set := map[string]string{}
	for _, s := range bi.Settings {
		set[s.Key] = s.Value
	}
	if rev := set["vcs.revision"]; rev != "" {
		r := "revision " + rev
		if t := set["vcs.time"]; t != "" {
			r += " of " + t
		}
		if set["vcs.modified"] == "true" {
			r += ", modified"
		}
		parts = append(parts, r)
	} else {
		parts = append(parts, "no VCS revision stamped (built outside a git work tree, or with -buildvcs=false)")
	}
	goVersion := bi.GoVersion
	if goVersion == "" {
		goVersion = runtime.Version()
	}
	parts = append(parts, goVersion)
	return strings.Join(parts, ", ")
}
