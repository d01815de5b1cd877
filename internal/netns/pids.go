package netns

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Pids returns the processes running in the namespace bound at
// /run/netns/name, as "ip netns pids" does: those whose network namespace
// is the same kernel object. Processes this user may not inspect, and
// zombies, are not listed.
func Pids(name string) ([]int, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(netnsDir, name), &st); err != nil {
		return nil, fmt.Errorf("netns: %s: %w", name, err)
	}
	want := "net:[" + strconv.FormatUint(st.Ino, 10) + "]"
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		link, err := os.Readlink("/proc/" + e.Name() + "/ns/net")
		if err != nil {
			continue // gone, a zombie, or not ours to see
		}
		if strings.TrimSpace(link) == want {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
