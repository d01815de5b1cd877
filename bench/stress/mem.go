package stress

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Mem is a process's resident memory in bytes, from /proc/PID/status.
type Mem struct {
	RSS int64 // VmRSS: resident now
	HWM int64 // VmHWM: the most ever resident (since start or ResetHWM)
}

// ReadMem reads the memory figures of process pid.
func ReadMem(pid int) (Mem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Mem{}, fmt.Errorf("stress: read memory of %d: %w", pid, err)
	}
	var m Mem
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		var dst *int64
		switch string(k) {
		case "VmRSS":
			dst = &m.RSS
		case "VmHWM":
			dst = &m.HWM
		default:
			continue
		}
		f := bytes.Fields(v) // "1234 kB"
		if len(f) != 2 || string(f[1]) != "kB" {
			return Mem{}, fmt.Errorf("stress: %s of %d reads %q", k, pid, v)
		}
		n, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return Mem{}, fmt.Errorf("stress: %s of %d: %w", k, pid, err)
		}
		*dst = n << 10
	}
	if m.RSS == 0 || m.HWM == 0 {
		return Mem{}, fmt.Errorf("stress: no VmRSS/VmHWM for %d", pid)
	}
	return m, nil
}

// ResetHWM makes the kernel restart pid's VmHWM from its current RSS
// (writing 5 to /proc/PID/clear_refs), so the high-water mark of one phase
// can be read on its own.
func ResetHWM(pid int) error {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return fmt.Errorf("stress: reset VmHWM of %d: %w", pid, err)
	}
	return nil
}

// MiB formats n bytes in mebibytes.
func MiB(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB" }
