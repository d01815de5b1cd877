package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseEndpointMapFiles(t *testing.T) {
	tests := []struct {
		file string
		want [][2]string // in file order
	}{
		{"two_tasks.endpoint_map", [][2]string{
			{"127.0.0.1:3333", "127.0.0.1:5555"},
			{"127.0.0.1:4444", "127.0.0.1:6666"},
		}},
		{"launch_dir.endpoint_map", [][2]string{
			{"127.0.0.1:42353", "127.0.0.1:46068"},
			{"127.0.0.1:42354", "127.0.0.1:47079"},
		}},
		{"commented_crlf.endpoint_map", [][2]string{
			{"ps0.cluster.local:2222", "ps0.cluster.local:3222"},
			{"worker-0.cluster.local:2222", "worker-0.cluster.local:3222"},
			{"[::1]:2223", "[::1]:3223"},
			{"[fe80::1%eth0]:2224", "10.0.0.7:3224"},
			{"198.18.0.1:2222", "198.18.0.1:2222"}, // same port number: TCP and UDP are apart
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			m, err := ReadEndpointMap(filepath.Join("testdata", "endpoint_map", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			var got [][2]string
			for g, s := range m.All() {
				got = append(got, [2]string{g, s})
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("entries\n got %v\nwant %v", got, tt.want)
			}
			if m.Len() != len(tt.want) {
				t.Errorf("Len = %d, want %d", m.Len(), len(tt.want))
			}
			for _, e := range tt.want {
				if s, err := m.Lookup(e[0]); err != nil || s != e[1] {
					t.Errorf("Lookup(%s) = %q, %v; want %q", e[0], s, err, e[1])
				}
			}
		})
	}
}

func TestParseEndpointMapErrors(t *testing.T) {
	tests := []struct {
		name, text string
		line       int
		is         error
		msg        string // a substring of the message
	}{
		{"missing equals", "a:1=b:2\n\n127.0.0.1:4444\n", 3, nil, "missing '='"},
		{"two equals", "a:1=b:2=c:3\n", 1, nil, "more than one '='"},
		{"empty grpc side", "=127.0.0.1:5555\n", 1, ErrBadAddress, "gRPC address"},
		{"empty star side", "127.0.0.1:3333=  # nothing\n", 1, ErrBadAddress, "starwire address"},
		{"no port", "# c\n127.0.0.1=127.0.0.1:5555\n", 2, ErrBadAddress, "missing port"},
		{"port not a number", "127.0.0.1:grpc=127.0.0.1:5555\n", 1, ErrBadAddress, "not a decimal"},
		{"negative port", "127.0.0.1:-1=127.0.0.1:5555\n", 1, ErrBadAddress, "not a decimal"},
		{"port too large", "127.0.0.1:3333=127.0.0.1:65536\n", 1, ErrBadAddress, "out of range"},
		{"port zero", "127.0.0.1:0=127.0.0.1:5555\n", 1, ErrBadAddress, "port 0"},
		{"space in host", "my host:1=h:2\n", 1, ErrBadAddress, "bad host name"},
		{"unbracketed ipv6", "::1:3333=h:2\n", 1, ErrBadAddress, ""},
		{"bad ipv6", "[::g]:3333=h:2\n", 1, ErrBadAddress, "IPv6"},
		{"duplicate grpc", "h:1=h:2\n\n# x\nh:1=h:3\n", 4, ErrDuplicateAddress, "first on line 1"},
		{"duplicate star", "h:1=h:9\nh:2=h:9\n", 2, ErrDuplicateAddress, "also given for h:1"},
		{"line too long", "h:1=h:2\n" + strings.Repeat("#", maxEndpointLine+1) + "\n", 2, nil, "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseEndpointMap("cluster.map", strings.NewReader(tt.text))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *ParseError", err)
			}
			if pe.Name != "cluster.map" || pe.Line != tt.line {
				t.Errorf("at %s:%d, want cluster.map:%d", pe.Name, pe.Line, tt.line)
			}
			prefix := fmt.Sprintf("cluster: cluster.map:%d: ", tt.line)
			if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("message %q, want prefix %q and %q", err, prefix, tt.msg)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
		})
	}
}

func TestParseEndpointMapTestdataErrors(t *testing.T) {
	for file, want := range map[string]string{
		"missing_equals.endpoint_map": "missing_equals.endpoint_map:2: \"127.0.0.1:4444\": missing '='",
		"duplicate_grpc.endpoint_map": "duplicate_grpc.endpoint_map:4: \"127.0.0.1:3333=127.0.0.1:7777\": gRPC address: duplicate address 127.0.0.1:3333 (first on line 2)",
	} {
		_, err := ReadEndpointMap(filepath.Join("testdata", "endpoint_map", file))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want it to contain %q", file, err, want)
		}
	}
}

func TestEndpointMapLookupAndStarAddr(t *testing.T) {
	m, err := ParseEndpointMap(".endpoint_map", strings.NewReader("127.0.0.1:2222=127.0.0.1:5555\n"))
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := ParseSpec("ps=127.0.0.1:2222,127.0.0.1:3333;worker=127.0.0.1:4444")
	if err != nil {
		t.Fatal(err)
	}
	if s, err := m.StarAddr(cluster, "ps", 0); err != nil || s != "127.0.0.1:5555" {
		t.Errorf("StarAddr(ps, 0) = %q, %v", s, err)
	}
	_, err = m.Lookup("127.0.0.1:3333")
	if !errors.Is(err, ErrNoStarAddr) || !strings.Contains(err.Error(), "127.0.0.1:3333") || !strings.Contains(err.Error(), ".endpoint_map") {
		t.Errorf("Lookup of a missing address: %v", err)
	}
	_, err = m.StarAddr(cluster, "ps", 1)
	const want = "cluster: /job:ps/replica:0/task:1 (127.0.0.1:3333): no starwire address in endpoint map .endpoint_map"
	if !errors.Is(err, ErrNoStarAddr) || err.Error() != want {
		t.Errorf("StarAddr(ps, 1):\n got %v\nwant %s", err, want)
	}
	_, err = m.StarAddr(cluster, "chief", 0)
	if !errors.Is(err, ErrNoTask) || !strings.Contains(err.Error(), "/job:chief/replica:0/task:0") {
		t.Errorf("StarAddr(chief, 0): %v", err)
	}
	err = m.CheckCluster(cluster)
	if !errors.Is(err, ErrNoStarAddr) || !strings.Contains(err.Error(), "2 of 3 tasks: /job:ps/replica:0/task:1 (127.0.0.1:3333), /job:worker/replica:0/task:0 (127.0.0.1:4444)") {
		t.Errorf("CheckCluster: %v", err)
	}
	if err := m.Add("127.0.0.1:3333", "127.0.0.1:6666"); err != nil {
		t.Fatal(err)
	}
	if err := m.Add("127.0.0.1:4444", "127.0.0.1:7777"); err != nil {
		t.Fatal(err)
	}
	if err := m.CheckCluster(cluster); err != nil {
		t.Errorf("CheckCluster after Add: %v", err)
	}
	if err := m.Add("127.0.0.1:4444", "127.0.0.1:8888"); !errors.Is(err, ErrDuplicateAddress) {
		t.Errorf("Add of a duplicate: %v", err)
	}
	var zero EndpointMap
	if _, err := zero.Lookup("h:1"); !errors.Is(err, ErrNoStarAddr) {
		t.Errorf("zero map Lookup: %v", err)
	}
}

func TestEndpointMapWriteToRoundTrip(t *testing.T) {
	m, err := ReadEndpointMap(filepath.Join("testdata", "endpoint_map", "commented_crlf.endpoint_map"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ParseEndpointMap("written", &buf)
	if err != nil {
		t.Fatal(err)
	}
	checkSameEntries(t, m, back)
}

func checkSameEntries(t *testing.T, a, b EndpointMap) {
	t.Helper()
	if a.Len() != b.Len() {
		t.Fatalf("Len %d, then %d", a.Len(), b.Len())
	}
	for g, s := range a.All() {
		if got, err := b.Lookup(g); err != nil || got != s {
			t.Fatalf("Lookup(%q) = %q, %v; want %q", g, got, err, s)
		}
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// LoadEndpointMap tests change the environment and the working directory, so
// they do not run in parallel.
func TestLoadEndpointMapFromEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cluster.endpoints")
	writeFile(t, path, "h:1=h:2\n")
	t.Setenv(EnvEndpointMapPath, path)
	t.Chdir(t.TempDir()) // a .endpoint_map here must not be read
	writeFile(t, DefaultEndpointMapFile, "h:1=h:3\n")
	m, err := LoadEndpointMap()
	if err != nil {
		t.Fatal(err)
	}
	if s, err := m.Lookup("h:1"); err != nil || s != "h:2" || m.Name() != path {
		t.Errorf("Lookup = %q, %v from %s; want h:2 from %s", s, err, m.Name(), path)
	}

	t.Setenv(EnvEndpointMapPath, filepath.Join(t.TempDir(), "absent"))
	_, err = LoadEndpointMap()
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "$"+EnvEndpointMapPath) {
		t.Errorf("missing file named by the variable: %v", err)
	}
}

func TestLoadEndpointMapFromWorkingDirectory(t *testing.T) {
	t.Setenv(EnvEndpointMapPath, "")
	t.Chdir(t.TempDir())
	_, err := LoadEndpointMap()
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "working directory") {
		t.Errorf("no .endpoint_map: %v", err)
	}
	writeFile(t, DefaultEndpointMapFile, "127.0.0.1:3333=127.0.0.1:5555\n127.0.0.1:4444\n")
	_, err = LoadEndpointMap()
	if err == nil || !strings.HasPrefix(err.Error(), "cluster: .endpoint_map:2: ") {
		t.Errorf("malformed .endpoint_map: %v", err)
	}
	writeFile(t, DefaultEndpointMapFile, "127.0.0.1:3333=127.0.0.1:5555\n")
	m, err := LoadEndpointMap()
	if err != nil {
		t.Fatal(err)
	}
	if s, err := m.Lookup("127.0.0.1:3333"); err != nil || s != "127.0.0.1:5555" {
		t.Errorf("Lookup = %q, %v", s, err)
	}
}

// FuzzParseEndpointMap checks that any input either fails with a
// *ParseError or yields a map whose entries are valid addresses and which
// survives a write and a re-read unchanged.
func FuzzParseEndpointMap(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "endpoint_map", "*"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseEndpointMap("fuzz", bytes.NewReader(data))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		n := 0
		for g, s := range m.All() {
			n++
			if CheckAddr(g) != nil || CheckAddr(s) != nil {
				t.Fatalf("accepted bad entry %q=%q", g, s)
			}
		}
		if n != m.Len() {
			t.Fatalf("All yields %d entries, Len says %d", n, m.Len())
		}
		var buf bytes.Buffer
		if _, err := m.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		back, err := ParseEndpointMap("rewritten", &buf)
		if err != nil {
			t.Fatalf("re-read of written map: %v\n%s", err, buf.Bytes())
		}
		checkSameEntries(t, m, back)
	})
}

func ExampleParseEndpointMap() {
	const file = `# grpc address = starwire address
127.0.0.1:3333=127.0.0.1:5555
127.0.0.1:4444=127.0.0.1:6666
`
	m, err := ParseEndpointMap(".endpoint_map", strings.NewReader(file))
	if err != nil {
		fmt.Println(err)
		return
	}
	cluster, _ := ParseSpec("ps=127.0.0.1:3333;worker=127.0.0.1:4444,127.0.0.1:7777")
	star, _ := m.StarAddr(cluster, "worker", 0)
	fmt.Println("worker 0 serves starwire at", star)
	_, err = m.StarAddr(cluster, "worker", 1)
	fmt.Println(err)

	_, err = ParseEndpointMap(".endpoint_map", strings.NewReader("127.0.0.1:3333=127.0.0.1:5555\n127.0.0.1:4444\n"))
	fmt.Println(err)
	// Output:
	// worker 0 serves starwire at 127.0.0.1:6666
	// cluster: /job:worker/replica:0/task:1 (127.0.0.1:7777): no starwire address in endpoint map .endpoint_map
	// cluster: .endpoint_map:2: "127.0.0.1:4444": missing '=', want grpcHost:port=starHost:port
}

// BenchmarkParseEndpointMap reads the map of a 2000-task cluster, the scale
// grpc+seastar is meant for, once per iteration.
func BenchmarkParseEndpointMap(b *testing.B) {
	var file strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&file, "10.%d.%d.1:2222=10.%d.%d.1:3222\n", i/250, i%250, i/250, i%250)
	}
	data := file.String()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		m, err := ParseEndpointMap("bench", strings.NewReader(data))
		if err != nil || m.Len() != 2000 {
			b.Fatalf("%d entries, %v", m.Len(), err)
		}
	}
}

// TestEndpointMapGRPCOnlyJobs: under grpc+seastar a TensorFlow master's
// client job needs no starwire address, while ps and worker still do.
func TestEndpointMapGRPCOnlyJobs(t *testing.T) {
	spec, err := ParseSpec("ps=127.0.0.1:1;worker=127.0.0.1:2;client=127.0.0.1:3")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseEndpointMap("map", strings.NewReader("127.0.0.1:1=127.0.0.1:11\n127.0.0.1:2=127.0.0.1:12\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !m.GRPCOnly(spec, "client") || m.GRPCOnly(spec, "ps") || m.GRPCOnly(spec, "worker") {
		t.Errorf("GRPCOnly: client %v, ps %v, worker %v; want true, false, false",
			m.GRPCOnly(spec, "client"), m.GRPCOnly(spec, "ps"), m.GRPCOnly(spec, "worker"))
	}
	if err := m.CheckCluster(spec); err != nil {
		t.Errorf("CheckCluster with a client job: %v", err)
	}
	noWorker, err := ParseEndpointMap("map", strings.NewReader("127.0.0.1:1=127.0.0.1:11\n127.0.0.1:3=127.0.0.1:13\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := noWorker.CheckCluster(spec); !errors.Is(err, ErrNoStarAddr) || !strings.Contains(err.Error(), "/job:worker/replica:0/task:0") {
		t.Errorf("CheckCluster without the worker's address: %v", err)
	}
}
