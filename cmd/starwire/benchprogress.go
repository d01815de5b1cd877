package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/starwire/starwire/bench"
)

// benchProgress shows a sweep's progress as a bar redrawn in place on a
// terminal; elsewhere (logs, CI) it shows nothing, the table says it all.
type benchProgress struct {
	w     io.Writer
	width int
}

func newBenchProgress(w io.Writer) *benchProgress {
	return &benchProgress{w: w, width: terminalWidth(w)}
}

func (b *benchProgress) show(done, total int, p bench.Point) {
	if b.width == 0 || total == 0 {
		return
	}
	label := fmt.Sprintf(" %d/%d %s %s ×%d %s", done, total, p.Workload, bench.FormatSize(p.Size), p.Concurrency, p.Protocol)
	if done == total {
		label = fmt.Sprintf(" %d/%d done", done, total)
	}
	barLen := max(b.width-len(label)-3, 10)
	filled := barLen * done / total
	line := "[" + strings.Repeat("#", filled) + strings.Repeat(".", barLen-filled) + "]" + label
	if len(line) > b.width-1 {
		line = line[:b.width-1]
	}
	fmt.Fprintf(b.w, "\r%-*s", b.width-1, line)
}

// done ends the bar's line.
func (b *benchProgress) done() {
	if b.width > 0 {
		fmt.Fprintln(b.w)
	}
}

func numCPU() int { return runtime.NumCPU() }
