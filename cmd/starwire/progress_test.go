package main

import (
	"bytes"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var progress35 = trainProgress{
	Elapsed: 20 * time.Second, Steps: 1400, TotalSteps: 4000, Examples: 1400 * 256,
	ExamplesPerSec: 17920, Loss: 0.4930, RPCsPerSec: 420, MBPerSec: 12.34,
}

func TestProgressLine(t *testing.T) {
	got := progressLine(progress35)
	want := "step 1400/4000 (35.0%)  17920 examples/s  loss 0.4930  420 RPC/s  12.3 MB/s  37s left"
	if got != want {
		t.Errorf("progressLine = %q\nwant           %q", got, want)
	}
	if got := progressLine(trainProgress{TotalSteps: 10}); !strings.Contains(got, "step 0/10 (0.0%)") || !strings.HasSuffix(got, "time left unknown") {
		t.Errorf("before the first step: %q", got)
	}
}

// TestProgressNoStep: an interval that finished no step has no loss (its
// mean is NaN): the line says no step completed instead of "loss NaN".
func TestProgressNoStep(t *testing.T) {
	first := trainProgress{Elapsed: 2 * time.Second, TotalSteps: 4000, Loss: math.NaN()}
	stalled := progress35
	stalled.Loss, stalled.ExamplesPerSec = math.NaN(), 0
	for _, tc := range []struct {
		p    trainProgress
		want string
	}{
		{first, "no step completed yet"},
		{stalled, "no step completed in the last interval"},
	} {
		for _, got := range []string{progressLine(tc.p), progressBar(tc.p, 200)} {
			if strings.Contains(got, "NaN") || !strings.Contains(got, tc.want) {
				t.Errorf("%q, want %q and no NaN", got, tc.want)
			}
		}
	}
}

func TestProgressBar(t *testing.T) {
	for _, width := range []int{40, 80, 200} {
		bar := progressBar(progress35, width)
		if n := len([]rune(bar)); n != width {
			t.Errorf("width %d: bar of %d columns: %q", width, n, bar)
		}
		if !strings.HasPrefix(bar, "[") || !strings.Contains(bar, "35%") || !strings.Contains(bar, "37s left") {
			t.Errorf("width %d: %q", width, bar)
		}
		inner := bar[1:strings.IndexByte(bar, ']')]
		if filled := strings.Count(inner, "#"); filled*100 < 30*len(inner) || filled*100 > 40*len(inner) {
			t.Errorf("width %d: %d of %d filled for 35%%: %q", width, filled, len(inner), bar)
		}
	}
	if bar := progressBar(progress35, 120); !strings.Contains(bar, "1400/4000 steps") || !strings.Contains(bar, "17920 examples/s") {
		t.Errorf("a wide bar lacks step/total or rate: %q", bar)
	}
	done := progress35
	done.Steps = done.TotalSteps
	if bar := progressBar(done, 60); strings.Contains(bar, ".]") || !strings.Contains(bar, "100%") {
		t.Errorf("finished: %q", bar)
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 1400 * time.Millisecond: "1s", 59 * time.Second: "59s", 65 * time.Second: "1m05s",
		time.Hour + 2*time.Minute + 5*time.Second: "1h02m05s",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// openPTY returns both ends of a new pseudo-terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 100}); err != nil {
		t.Fatalf("set window size: %v", err)
	}
	return m, s
}

// TestProgressDisplayChoosesBar: on a terminal the display redraws one bar
// in place at the terminal's width; elsewhere it writes plain lines.
func TestProgressDisplayChoosesBar(t *testing.T) {
	_, tty := openPTY(t)
	d := newProgressDisplay(&stdoutWriter{w: tty})
	if d.width != 100 {
		t.Fatalf("terminal of 100 columns taken for width %d", d.width)
	}
	if got := d.interval(2*time.Second, false); got != 250*time.Millisecond {
		t.Errorf("a bar moves every %v", got)
	}
	var buf bytes.Buffer
	d.w = &buf // what would reach the terminal
	d.update(progress35)
	d.update(progress35)
	d.finish()
	if out := buf.String(); strings.Count(out, "\r") != 2 || strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Errorf("terminal output %q: want two redraws and one final newline", out)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	plain := newProgressDisplay(&stdoutWriter{w: w})
	if plain.width != 0 || plain.interval(2*time.Second, false) != 2*time.Second {
		t.Errorf("a pipe taken for a terminal: width %d", plain.width)
	}
	buf.Reset()
	plain.w = &buf
	plain.update(progress35)
	plain.finish()
	if out := buf.String(); out != progressLine(progress35)+"\n" {
		t.Errorf("plain output %q", out)
	}
}
