package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A progressDisplay shows a training job's progress: on a terminal one bar
// redrawn in place, otherwise one line per report, for logs.
type progressDisplay struct {
	w     io.Writer
	width int // the terminal's columns; 0 when w is not a terminal
	drawn bool
}

func newProgressDisplay(w io.Writer) *progressDisplay {
	return &progressDisplay{w: w, width: terminalWidth(w)}
}

// terminalWidth returns the columns of the terminal w writes to, 0 when w
// is not a terminal.
func terminalWidth(w io.Writer) int {
	if o, ok := w.(*stdoutWriter); ok {
		w = o.w
	}
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		return 0
	}
	if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col >= 40 {
		return int(ws.Col)
	}
	return 80
}

// interval is how often the display wants a report: a bar moves smoothly,
// lines come at the user's interval.
func (d *progressDisplay) interval(lines time.Duration, set bool) time.Duration {
	if d.width > 0 && !set {
		return 250 * time.Millisecond
	}
	return lines
}

func (d *progressDisplay) update(p trainProgress) {
	if d.width == 0 {
		fmt.Fprintln(d.w, progressLine(p))
		return
	}
	fmt.Fprintf(d.w, "\r%s", progressBar(p, d.width))
	d.drawn = true
}

// finish ends the bar's line, so that what follows starts on its own.
func (d *progressDisplay) finish() {
	if d.drawn {
		fmt.Fprintln(d.w)
		d.drawn = false
	}
}

// progressLine is one report as a line:
// step 1418/4000 (35.5%)  2516 examples/s  loss 0.4930  1234 RPC/s  12.3 MB/s  1m05s left
func progressLine(p trainProgress) string {
	if p.Waiting != "" {
		return fmt.Sprintf("step %d/%d (%.1f%%)  %s", p.Steps, p.TotalSteps, percent(p), waiting(p))
	}
	return fmt.Sprintf("step %d/%d (%.1f%%)  %s  %s", p.Steps, p.TotalSteps, percent(p), rates(p), timeLeft(p))
}

// progressBar is one report as a bar of exactly width columns:
// [########......] 35%  1418/4000 steps  2516 examples/s  loss 0.4930 ...  1m05s left
func progressBar(p trainProgress, width int) string {
	tail := fmt.Sprintf(" %3.0f%%  %d/%d steps  %s  %s", percent(p), p.Steps, p.TotalSteps, rates(p), timeLeft(p))
	if p.Waiting != "" {
		tail = fmt.Sprintf(" %3.0f%%  %d/%d steps  %s", percent(p), p.Steps, p.TotalSteps, waiting(p))
	}
	bar := width - len([]rune(tail)) - 2
	if bar < 10 {
		// A narrow terminal keeps the bar and drops rates from the right.
		bar = 10
		tail = fmt.Sprintf(" %3.0f%%  %s", percent(p), timeLeft(p))
	}
	filled := int(math.Round(float64(bar) * percent(p) / 100))
	filled = min(max(filled, 0), bar)
	line := "[" + strings.Repeat("#", filled) + strings.Repeat(".", bar-filled) + "]" + tail
	if r := []rune(line); len(r) > width {
		line = string(r[:width])
	}
	return line + strings.Repeat(" ", max(width-len([]rune(line)), 0))
}

func percent(p trainProgress) float64 {
	if p.TotalSteps <= 0 {
		return 0
	}
	return 100 * float64(p.Steps) / float64(p.TotalSteps)
}

// waiting says what a paused job waits for:
// waiting for /job:ps/replica:0/task:0, 3.2 s
func waiting(p trainProgress) string {
	return fmt.Sprintf("waiting for %s, %.1f s", p.Waiting, p.WaitingFor.Seconds())
}

// rates says how fast the last interval went; an interval without a
// finished step has no loss to show (its mean is NaN), so it says that.
func rates(p trainProgress) string {
	if math.IsNaN(p.Loss) {
		if p.Examples == 0 {
			return "no step completed yet"
		}
		return fmt.Sprintf("no step completed in the last interval  %.0f RPC/s  %.1f MB/s", p.RPCsPerSec, p.MBPerSec)
	}
	return fmt.Sprintf("%.0f examples/s  loss %.4f  %.0f RPC/s  %.1f MB/s", p.ExamplesPerSec, p.Loss, p.RPCsPerSec, p.MBPerSec)
}

// timeLeft estimates the rest of the run from its average rate so far.
func timeLeft(p trainProgress) string {
	if p.Steps <= 0 || p.Elapsed <= 0 {
		return "time left unknown"
	}
	left := time.Duration(float64(p.Elapsed) * float64(p.TotalSteps-p.Steps) / float64(p.Steps))
	return formatDuration(left) + " left"
}

// formatDuration writes d to the second, as 45s, 3m07s or 1h02m05s.
func formatDuration(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm%02ds", s/3600, s%3600/60, s%60)
}
