// Package chart draws the charts of a bench.Report: throughput and
// p50/p99 latency against size and against calls in flight, one line per
// protocol, as PNG or SVG files; for a fan-in sweep (bench.Point.Peers),
// p50/p99 latency and the server's memory per peer against peers. It lives apart from package bench so that
// the starwire binary, which runs sweeps, links no plotting library;
// bench/cmd/charts draws a results.json written by "starwire bench".
package chart

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/starwire/starwire/bench"
)

// protoColors give each protocol one colour in every chart.
var protoColors = map[string]color.Color{
	bench.ProtoGRPC:  color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	bench.ProtoTCP:   color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	bench.ProtoUDP:   color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	bench.ProtoAFXDP: color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// throughput is the figure a workload's throughput chart plots: MB/s for
// tensor transfers, calls/s otherwise.
func throughput(w bench.Workload) (label string, get func(bench.Measurement) float64) {
	if w == bench.WorkRecvTensor || w == bench.WorkFuse {
		return "MB/s", func(m bench.Measurement) float64 { return m.MBPerSec }
	}
	if w == bench.WorkPSMix {
		return "steps/s", func(m bench.Measurement) float64 { return m.CallsPerSec }
	}
	return "calls/s", func(m bench.Measurement) float64 { return m.CallsPerSec }
}

// Write draws, from r, for each workload (and server core count), the
// throughput and the p50/p99 latencies against size (at one concurrency)
// and against concurrency (at one size), one line per protocol, as files
// in dir with each of exts ("png", "svg"). It returns the files' paths.
func Write(r *bench.Report, dir string, exts ...string) ([]string, error) {
	var paths []string
	type group struct {
		w     bench.Workload
		cores int
	}
	var groups []group
	byGroup := map[group][]bench.Measurement{}
	for _, m := range r.Measurements {
		if m.Err != "" {
			continue
		}
		g := group{m.Workload, m.Cores}
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], m)
	}
	for _, g := range groups {
		ms := byGroup[g]
		name := string(g.w)
		if g.cores > 0 {
			name += "-cores" + strconv.Itoa(g.cores)
		}
		sizes, concs := distinct(ms, func(m bench.Measurement) int { return m.Size }), distinct(ms, func(m bench.Measurement) int { return m.Concurrency })
		if peers := distinct(ms, func(m bench.Measurement) int { return m.Peers }); len(peers) > 1 || peers[0] > 0 {
			// A fan-in sweep: its callers follow its peers.
			size := sizes[0]
			at := filter(ms, func(m bench.Measurement) bool { return m.Size == size })
			ps, err := peersCharts(dir, name+"-by-peers", fmt.Sprintf("%s, %s", g.w, bench.FormatSize(size)), at, exts)
			if err != nil {
				return paths, err
			}
			paths = append(paths, ps...)
			continue
		}
		if len(sizes) > 1 {
			conc := pick(concs, 32)
			at := filter(ms, func(m bench.Measurement) bool { return m.Concurrency == conc })
			sub := fmt.Sprintf("%s, %d in flight", g.w, conc)
			ps, err := chartPair(dir, name+"-by-size", sub, sizeLabel, at, func(m bench.Measurement) float64 { return float64(m.Size) }, g.w, exts)
			if err != nil {
				return paths, err
			}
			paths = append(paths, ps...)
		}
		if len(concs) > 1 {
			size := sizes[0]
			at := filter(ms, func(m bench.Measurement) bool { return m.Size == size })
			sub := fmt.Sprintf("%s, %s", g.w, bench.FormatSize(size))
			ps, err := chartPair(dir, name+"-by-concurrency", sub, "calls in flight", at, func(m bench.Measurement) float64 { return float64(m.Concurrency) }, g.w, exts)
			if err != nil {
				return paths, err
			}
			paths = append(paths, ps...)
		}
	}
	return paths, nil
}

// chartPair draws the throughput and the latency chart of ms against x.
func chartPair(dir, name, subtitle, xlabel string, ms []bench.Measurement, x func(bench.Measurement) float64, w bench.Workload, exts []string) ([]string, error) {
	tlabel, tget := throughput(w)
	tp := newChart(subtitle+": throughput", xlabel, tlabel)
	lp := newChart(subtitle+": latency (solid p50, dashed p99)", xlabel, "µs")
	var xs []float64
	for _, m := range ms {
		if v := x(m); !slices.Contains(xs, v) {
			xs = append(xs, v)
		}
	}
	label := func(v float64) string { return strconv.Itoa(int(v)) }
	if xlabel == sizeLabel {
		label = func(v float64) string { return bench.FormatSize(int(v)) }
	}
	tp.X.Tick.Marker, lp.X.Tick.Marker = valueTicks{xs, label}, valueTicks{xs, label}
	lp.Y.Scale = plot.LogScale{}
	lp.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	for _, proto := range protocolsOf(ms) {
		pts := filter(ms, func(m bench.Measurement) bool { return m.Protocol == proto })
		slices.SortFunc(pts, func(a, b bench.Measurement) int { return int(x(a) - x(b)) })
		if err := addLine(tp, proto, pts, x, tget, false, true); err != nil {
			return nil, err
		}
		if err := addLine(lp, proto, pts, x, func(m bench.Measurement) float64 { return m.P50 }, false, true); err != nil {
			return nil, err
		}
		if err := addLine(lp, proto, pts, x, func(m bench.Measurement) float64 { return m.P99 }, true, false); err != nil {
			return nil, err
		}
	}
	// Room above the lines for the legend; throughput from zero; latency
	// from a power of ten, so its lowest point has a labelled tick below.
	tp.Y.Min, tp.Y.Max = 0, tp.Y.Max*1.3
	lp.Y.Max *= 4
	if lp.Y.Min > 0 {
		lp.Y.Min = math.Pow(10, math.Floor(math.Log10(lp.Y.Min)))
	}
	var paths []string
	for _, ext := range exts {
		for _, c := range []struct {
			p    *plot.Plot
			file string
		}{{tp, name + "-throughput." + ext}, {lp, name + "-latency." + ext}} {
			path := filepath.Join(dir, c.file)
			if err := c.p.Save(16*vg.Centimeter, 10*vg.Centimeter, path); err != nil {
				return paths, fmt.Errorf("chart %s: %w", path, err)
			}
			paths = append(paths, path)
		}
	}
	return paths, nil
}

const sizeLabel = "size"

// peersCharts draws a fan-in sweep's latency (p50, p99) and the server's
// memory per peer against peers.
func peersCharts(dir, name, subtitle string, ms []bench.Measurement, exts []string) ([]string, error) {
	x := func(m bench.Measurement) float64 { return float64(m.Peers) }
	lp := newChart(subtitle+": latency (solid p50, dashed p99)", "peers", "µs")
	mp := newChart(subtitle+": server memory per peer", "peers", "KiB")
	var xs []float64
	for _, m := range ms {
		if v := x(m); !slices.Contains(xs, v) {
			xs = append(xs, v)
		}
	}
	label := func(v float64) string { return strconv.Itoa(int(v)) }
	lp.X.Tick.Marker, mp.X.Tick.Marker = valueTicks{xs, label}, valueTicks{xs, label}
	lp.Y.Scale, mp.Y.Scale = plot.LogScale{}, plot.LogScale{}
	lp.Y.Tick.Marker, mp.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	for _, proto := range protocolsOf(ms) {
		pts := filter(ms, func(m bench.Measurement) bool { return m.Protocol == proto })
		slices.SortFunc(pts, func(a, b bench.Measurement) int { return a.Peers - b.Peers })
		if err := addLine(lp, proto, pts, x, func(m bench.Measurement) float64 { return m.P50 }, false, true); err != nil {
			return nil, err
		}
		if err := addLine(lp, proto, pts, x, func(m bench.Measurement) float64 { return m.P99 }, true, false); err != nil {
			return nil, err
		}
		if err := addLine(mp, proto, pts, x, func(m bench.Measurement) float64 { return m.RSSPerPeer / 1024 }, false, true); err != nil {
			return nil, err
		}
	}
	for _, p := range []*plot.Plot{lp, mp} {
		p.Y.Max *= 4
		if p.Y.Min > 0 {
			p.Y.Min = math.Pow(10, math.Floor(math.Log10(p.Y.Min)))
		}
	}
	var paths []string
	for _, ext := range exts {
		for _, c := range []struct {
			p    *plot.Plot
			file string
		}{{lp, name + "-latency." + ext}, {mp, name + "-memory." + ext}} {
			path := filepath.Join(dir, c.file)
			if err := c.p.Save(16*vg.Centimeter, 10*vg.Centimeter, path); err != nil {
				return paths, fmt.Errorf("chart %s: %w", path, err)
			}
			paths = append(paths, path)
		}
	}
	return paths, nil
}

// valueTicks mark the values measured, labelled by label.
type valueTicks struct {
	vals  []float64
	label func(float64) string
}

func (t valueTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for _, v := range t.vals {
		if v >= lo && v <= hi {
			ts = append(ts, plot.Tick{Value: v, Label: t.label(v)})
		}
	}
	return ts
}

func newChart(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Title.Padding = vg.Points(6)
	p.Add(plotter.NewGrid())
	return p
}

// addLine adds one of proto's lines; legend says whether it gets a legend
// entry.
func addLine(p *plot.Plot, proto string, ms []bench.Measurement, x, y func(bench.Measurement) float64, dashed, legend bool) error {
	var xys plotter.XYs
	for _, m := range ms {
		if v := y(m); v > 0 && !math.IsInf(v, 0) {
			xys = append(xys, plotter.XY{X: x(m), Y: v})
		}
	}
	if len(xys) == 0 {
		return nil
	}
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	c := protoColors[proto]
	if c == nil {
		c = color.Black
	}
	l.Color, s.Color = c, c
	l.Width = vg.Points(1.5)
	s.Shape = draw.CircleGlyph{}
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		s.Shape = draw.BoxGlyph{}
	}
	p.Add(l, s)
	if legend {
		p.Legend.Add(proto, l, s)
	}
	return nil
}

func distinct(ms []bench.Measurement, f func(bench.Measurement) int) []int {
	var out []int
	for _, m := range ms {
		if v := f(m); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// pick returns the largest of vs at most want, else the smallest.
func pick(vs []int, want int) int {
	best := vs[0]
	for _, v := range vs {
		if v <= want {
			best = v
		}
	}
	return best
}

func filter(ms []bench.Measurement, keep func(bench.Measurement) bool) []bench.Measurement {
	var out []bench.Measurement
	for _, m := range ms {
		if keep(m) {
			out = append(out, m)
		}
	}
	return out
}

// protocolsOf lists the protocols of ms in bench.Protocols' order.
func protocolsOf(ms []bench.Measurement) []string {
	var out []string
	for _, p := range bench.Protocols {
		for _, m := range ms {
			if m.Protocol == p {
				out = append(out, p)
				break
			}
		}
	}
	return out
}
