package staleness

import (
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Row is one Result as JSON: the run's shape and its measurements, times
// in milliseconds.
type Row struct {
	Mode          string  `json:"mode"`
	Protocol      string  `json:"protocol"`
	Workers       int     `json:"workers"`
	DataBytes     int     `json:"data_bytes"`
	PushEveryMS   float64 `json:"push_every_ms"`
	PullEveryMS   float64 `json:"pull_every_ms"`
	StepEveryMS   float64 `json:"step_every_ms"`
	ElapsedMS     float64 `json:"elapsed_ms"`
	Versions      uint64  `json:"versions"`
	Samples       int     `json:"samples"`
	StaleMean     float64 `json:"staleness_mean"`
	StaleP50      int     `json:"staleness_p50"`
	StaleP99      int     `json:"staleness_p99"`
	StaleMax      uint64  `json:"staleness_max"`
	Pushes        int     `json:"pushes"`
	PushP50MS     float64 `json:"push_p50_ms"`
	PushP99MS     float64 `json:"push_p99_ms"`
	Pulls         int     `json:"pulls"`
	PullP50MS     float64 `json:"pull_p50_ms"`
	PullP99MS     float64 `json:"pull_p99_ms"`
	EmptyPulls    int     `json:"empty_pulls"`
	MBps          float64 `json:"mb_per_s"`
	CorruptedBlob int     `json:"corrupted"`
}

// RowOf returns r as a Row.
func RowOf(r *Result) Row {
	c := r.Config
	return Row{
		Mode: c.mode(), Protocol: r.Protocol, Workers: c.Workers, DataBytes: c.DataSize,
		PushEveryMS: ms(c.PushEvery), PullEveryMS: ms(c.PullEvery), StepEveryMS: ms(c.StepEvery), ElapsedMS: ms(r.Elapsed),
		Versions: r.Versions, Samples: r.Samples,
		StaleMean: r.MeanStaleness, StaleP50: r.StaleQuantile(0.5), StaleP99: r.StaleQuantile(0.99), StaleMax: r.MaxStaleness,
		Pushes: r.Push.Count(), PushP50MS: ms(r.Push.Quantile(0.5)), PushP99MS: ms(r.Push.Quantile(0.99)),
		Pulls: r.Pull.Count(), PullP50MS: ms(r.Pull.Quantile(0.5)), PullP99MS: ms(r.Pull.Quantile(0.99)),
		EmptyPulls: r.EmptyPulls, MBps: r.MBps(), CorruptedBlob: r.Corrupted,
	}
}

// WriteOut writes into dir (made if missing) the table as printed
// (staleness.txt), the results as JSON (staleness.json) and a chart of
// mean staleness against workers, a line per mode and protocol
// (staleness.svg). It returns the files' paths.
func WriteOut(dir string, table []string, results []*Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("staleness: --out: %w", err)
	}
	rows := make([]Row, len(results))
	for i, r := range results {
		rows[i] = RowOf(r)
	}
	js, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"staleness.txt":  []byte(strings.Join(table, "\n") + "\n"),
		"staleness.json": append(js, '\n'),
		"staleness.svg":  []byte(Chart(rows)),
	}
	var paths []string
	for _, name := range []string{"staleness.txt", "staleness.json", "staleness.svg"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return nil, fmt.Errorf("staleness: --out: %w", err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// Chart draws mean staleness (versions behind) against workers, one line
// per mode and protocol, as a small SVG: workers on a log scale, as the
// counts grow by factors. It is written by hand, the lines few.
func Chart(rows []Row) string {
	const w, h, left, right, top, bottom = 640, 400, 60, 170, 30, 50
	type key struct{ mode, protocol string }
	series := map[key][]Row{}
	var keys []key
	var workers []int
	highest := 0.0
	for _, r := range rows {
		k := key{r.Mode, r.Protocol}
		if _, ok := series[k]; !ok {
			keys = append(keys, k)
		}
		series[k] = append(series[k], r)
		if !slices.Contains(workers, r.Workers) {
			workers = append(workers, r.Workers)
		}
		highest = max(highest, r.StaleMean)
	}
	slices.Sort(workers)
	yMax := niceCeil(highest)
	x := func(n int) float64 {
		i := slices.Index(workers, n)
		if len(workers) == 1 {
			return left + float64(w-left-right)/2
		}
		return left + float64(i)*float64(w-left-right)/float64(len(workers)-1)
	}
	y := func(v float64) float64 { return top + (1-v/yMax)*float64(h-top-bottom) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14">mean staleness (versions behind) against workers</text>`+"\n", left)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, h-bottom)
	for i := 0; i <= 4; i++ {
		v := yMax * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%.2g</text>`+"\n",
			left, y(v), w-right, y(v), left-6, y(v)+4, v)
	}
	for _, n := range workers {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x(n), h-bottom+18, n)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">workers</text>`+"\n", left+(w-left-right)/2, h-bottom+38)
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}
	for i, k := range keys {
		c := colors[i%len(colors)]
		dash := ""
		if k.mode == ModePull {
			dash = ` stroke-dasharray="6 4"`
		}
		rs := series[k]
		slices.SortFunc(rs, func(a, b Row) int { return a.Workers - b.Workers })
		var pts []string
		for _, r := range rs {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.Workers), y(r.StaleMean)))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(r.Workers), y(r.StaleMean), c)
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), c, dash)
		ly := top + 10 + i*18
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/><text x="%d" y="%d">%s</text>`+"\n",
			w-right+10, ly, w-right+34, ly, c, dash, w-right+40, ly+4, html.EscapeString(k.mode+" "+k.protocol))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 at least).
func niceCeil(v float64) float64 {
	n := 1.0
	for n < v {
		switch {
		case n*2 >= v:
			return n * 2
		case n*5 >= v:
			return n * 5
		}
		n *= 10
	}
	return n
}
