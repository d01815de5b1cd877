package netns

import (
	"errors"
	"os"
	"strconv"
	"strings"

	vnetns "github.com/vishvananda/netns"
)

// netnsDir is where named namespaces are bound.
const netnsDir = "/run/netns"

// SweepStale deletes namespaces this package created in processes that no
// longer exist (a test binary killed before its cleanups ran), with the
// veth pairs inside them. New calls it once per process; it returns how
// many it removed.
func SweepStale() (int, error) {
	ents, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for _, e := range ents {
		pid, ok := ownerPid(e.Name())
		if !ok || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			continue
		}
		if err := vnetns.DeleteNamed(e.Name()); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// ownerPid parses the pid out of a name New made ("sw-<pid>-<n>-a").
func ownerPid(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "sw-")
	if !ok {
		return 0, false
	}
	f := strings.Split(rest, "-")
	if len(f) != 3 || (f[2] != "a" && f[2] != "b") {
		return 0, false
	}
	pid, err := strconv.Atoi(f[0])
	return pid, err == nil && pid > 0
}
