package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"

	"github.com/starwire/starwire/internal/units"
)

// A Report is a sweep's results with what a reader needs to reproduce them.
type Report struct {
	Date         string        `json:"date"`
	Command      string        `json:"command"`
	Machine      string        `json:"machine"`
	Layout       string        `json:"layout"` // "separate processes" or "one process"
	Measurements []Measurement `json:"measurements"`
}

// WriteJSON writes r, indented.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadReport reads a report WriteJSON wrote.
func ReadReport(rd io.Reader) (*Report, error) {
	var r Report
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return nil, fmt.Errorf("bench: read report: %w", err)
	}
	return &r, nil
}

// WriteTable writes one row per measurement, and after each point's rows
// how starwire over TCP compares with gRPC there ("-" without both).
func (r *Report) WriteTable(w io.Writer) error {
	for _, m := range r.Measurements {
		if m.Peers > 0 {
			return r.writePeersTable(w)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tsize\tin flight\tcores\tprotocol\tcalls/s\tMB/s\tp50 µs\tp99 µs\tp99.9 µs\tvs grpc\t")
	grpc := map[Point]float64{}
	for _, m := range r.Measurements {
		if m.Protocol == ProtoGRPC && m.Err == "" {
			grpc[m.key()] = m.CallsPerSec
		}
	}
	var failed []Measurement
	for _, m := range r.Measurements {
		cores := "default"
		if m.Cores > 0 {
			cores = strconv.Itoa(m.Cores)
		}
		if m.Err != "" {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t-\t-\t-\t-\t-\t-\t\n", m.Workload, FormatSize(m.Size), m.Concurrency, cores, m.Protocol)
			failed = append(failed, m)
			continue
		}
		vs := "-"
		if g := grpc[m.key()]; g > 0 && m.Protocol != ProtoGRPC {
			vs = strconv.FormatFloat(m.CallsPerSec/g, 'f', 2, 64) + "×"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t\n", m.Workload, FormatSize(m.Size), m.Concurrency, cores,
			m.Protocol, groupThousands(int64(m.CallsPerSec+0.5)), m.MBPerSec, m.P50, m.P99, m.P999, vs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, m := range failed {
		if !seen[m.Err] {
			seen[m.Err] = true
			fmt.Fprintf(w, "%s %s: %s\n", m.Protocol, m.Workload, m.Err)
		}
	}
	return nil
}

// writePeersTable writes a fan-in sweep's table: one row per measurement,
// with the peers, the latencies and the server's memory.
func (r *Report) writePeersTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tsize\tpeers\tcallers\tprotocol\trate/s\tcalls/s\terrors\tp50 µs\tp99 µs\tp99.9 µs\tlate p50/p99 µs\tserver CPU µs/call\tserver RSS MiB\tbase MiB\tKiB/peer\t")
	var failed []Measurement
	for _, m := range r.Measurements {
		if m.Err != "" && m.Calls == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%.0f\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t\n", m.Workload, FormatSize(m.Size), m.Peers, m.Concurrency, m.Protocol, m.Rate)
			failed = append(failed, m)
			continue
		}
		if m.Err != "" {
			failed = append(failed, m)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%.0f\t%s\t%d\t%.1f\t%.1f\t%.1f\t%.0f/%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", m.Workload, FormatSize(m.Size), m.Peers, m.Concurrency,
			m.Protocol, m.Rate, groupThousands(int64(m.CallsPerSec+0.5)), m.Errors, m.P50, m.P99, m.P999, m.LateP50, m.LateP99, m.ServerCPUPerCall,
			float64(m.ServerRSS)/(1<<20), float64(m.ServerRSSBase)/(1<<20), m.RSSPerPeer/(1<<10))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, m := range failed {
		if !seen[m.Err] {
			seen[m.Err] = true
			fmt.Fprintf(w, "%s %s %d peers: %s\n", m.Protocol, m.Workload, m.Peers, m.Err)
		}
	}
	return nil
}

// key is the point without its protocol, to pair protocols' rows.
func (m Measurement) key() Point {
	p := m.Point
	p.Protocol = ""
	return p
}

// FormatSize writes n bytes as 64B, 4KiB, 16MiB.
func FormatSize(n int) string { return units.FormatSize(int64(n)) }

// ParseSize reads a size in internal/units' grammar, which reads what
// FormatSize writes.
func ParseSize(s string) (int, error) {
	n, err := units.ParseSize(s)
	if err != nil || n > math.MaxInt {
		return 0, fmt.Errorf("bench: size %q, want bytes such as 64, 4KiB or 16MiB", s)
	}
	return int(n), nil
}
