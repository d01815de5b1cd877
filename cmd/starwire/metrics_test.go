package main

import (
	"net/http"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestServeMetrics runs a cluster of serve processes, two of them with
// --metrics_addr, trains on it, and scrapes both over HTTP as Prometheus
// would: the calls they served and made, and the tensor bytes RecvTensor
// moved, are there and non-zero.
func TestServeMetrics(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	dir := t.TempDir()
	var servers []*process
	for _, task := range []struct {
		job   string
		index int
	}{{"ps", 0}, {"worker", 0}, {"worker", 1}} {
		args := []string{"serve", "--job", task.job, "--task", strconv.Itoa(task.index),
			"--ps", "1", "--workers", "2", "--registry_dir", dir, "--report", "0"}
		if task.index == 0 {
			args = append(args, "--metrics_addr", "127.0.0.1:0")
		}
		servers = append(servers, startBinary(t, nil, args...))
	}
	urlRe := regexp.MustCompile(`^metrics at (http://\S+/metrics)$`)
	psURL := urlRe.FindStringSubmatch(servers[0].waitLine(t, urlRe, 20*time.Second))[1]
	workerURL := urlRe.FindStringSubmatch(servers[1].waitLine(t, urlRe, 20*time.Second))[1]
	code, out, errOut := runBinary(t, nil, "train", "--registry_dir", dir, "--steps", "20", "--vocab", "5000",
		"--held_out", "256", "--connect_timeout", "20s")
	if code != 0 {
		t.Fatalf("train: exit %d: %s\n%s", code, errOut, out)
	}
	ps, worker := scrapeURL(t, psURL), scrapeURL(t, workerURL)
	for _, c := range []struct {
		fams   map[string]*dto.MetricFamily
		name   string
		labels map[string]string
	}{
		{worker, "starwire_server_calls_total", map[string]string{"method": "RunGraph", "path": "tcp", "code": "OK"}},
		{worker, "starwire_server_call_duration_seconds", map[string]string{"method": "RunGraph", "path": "tcp"}},
		{worker, "starwire_client_calls_total", map[string]string{"method": "RecvTensor", "path": "tcp", "code": "OK"}},
		{worker, "starwire_client_received_bytes_total", map[string]string{"method": "RecvTensor", "path": "tcp", "part": "tensors"}},
		{ps, "starwire_server_calls_total", map[string]string{"method": "RecvTensor", "path": "tcp", "code": "OK"}},
		{ps, "starwire_server_sent_bytes_total", map[string]string{"method": "RecvTensor", "path": "tcp", "part": "tensors"}},
		{ps, "starwire_server_received_bytes_total", map[string]string{"method": "RunGraph", "path": "tcp", "part": "meta"}},
	} {
		if v := metricValue(t, c.fams, c.name, c.labels); v <= 0 {
			t.Errorf("%s%v = %v after training, want > 0", c.name, c.labels, v)
		}
	}
	for _, s := range servers {
		if code := s.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("serve exited %d on SIGTERM:\n%s", code, s.stderr.String())
		}
	}
}

// scrapeURL fetches url and parses the text exposition format.
func scrapeURL(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// metricValue sums the values (a histogram's sample counts) of family
// name's series whose labels include want.
func metricValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no metric %s in the scrape", name)
	}
	var sum float64
	for _, m := range f.Metric {
		match := true
		for k, v := range want {
			found := false
			for _, l := range m.Label {
				found = found || (l.GetName() == k && l.GetValue() == v)
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}
