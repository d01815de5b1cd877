package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionFlag(t *testing.T) {
	for _, arg := range []string{"--version", "-version", "version"} {
		code, out, errs := runCapture(arg)
		if code != 0 || !strings.HasPrefix(out, "starwire ") || !strings.Contains(out, runtime.Version()) || errs != "" {
			t.Errorf("starwire %s: exit %d, stdout %q, stderr %q", arg, code, out, errs)
		}
	}
}

func TestFormatVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/starwire/starwire", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "e5160c0abc"}, {Key: "vcs.time", Value: "2026-12-01T20:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	want := "starwire v0.3.0 (github.com/starwire/starwire), revision e5160c0abc of 2026-12-01T20:00:00Z, modified, go1.26.8"
	if got := formatVersion(bi); got != want {
		t.Errorf("formatVersion = %q\nwant            %q", got, want)
	}
	if got := formatVersion(&debug.BuildInfo{GoVersion: "go1.26.8"}); got != "starwire (devel), no VCS revision stamped (built outside a git work tree, or with -buildvcs=false), go1.26.8" {
		t.Errorf("without module or VCS info: %q", got)
	}
}
