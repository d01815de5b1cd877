package deploy

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/starwire/starwire/rpc/cluster"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain removes the binary the tests built (39 MB a run otherwise).
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// starwire builds the command from the repository as the Dockerfile does,
// statically (CGO_ENABLED=0), and returns its path.
func starwire(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "starwire-deploy-test")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "starwire")
		cmd := exec.Command(goTool(), "build", "-C", "..", "-o", binPath, "./cmd/starwire")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{err, out}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return "build starwire: " + e.err.Error() + "\n" + string(e.out) }

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}

// manifests runs "starwire cluster manifests" with args.
func manifests(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(starwire(t), append([]string{"cluster", "manifests"}, args...)...).Output()
	if err != nil {
		t.Fatalf("cluster manifests %v: %v", args, err)
	}
	return out
}

// objects are a manifest file's documents, decoded strictly.
type objects struct {
	services map[string]*corev1.Service
	pods     map[string]*corev1.Pod
}

// decode decodes every document of data with the Kubernetes API types,
// refusing unknown and duplicate fields.
func decode(t *testing.T, data []byte) objects {
	t.Helper()
	o := objects{services: map[string]*corev1.Service{}, pods: map[string]*corev1.Pod{}}
	docs := strings.Split(string(data), "\n---\n")
	for i, doc := range docs[1:] { // the first is the header comment
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("document %d: %v", i+1, err)
		}
		switch {
		case tm.APIVersion == "v1" && tm.Kind == "Service":
			var s corev1.Service
			if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
				t.Fatalf("document %d (Service): %v", i+1, err)
			}
			o.services[s.Name] = &s
		case tm.APIVersion == "v1" && tm.Kind == "Pod":
			var p corev1.Pod
			if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
				t.Fatalf("document %d (Pod): %v", i+1, err)
			}
			o.pods[p.Name] = &p
		default:
			t.Fatalf("document %d: unexpected %s %s", i+1, tm.APIVersion, tm.Kind)
		}
	}
	if strings.TrimSpace(docs[0]) != "" && !strings.HasPrefix(strings.TrimSpace(docs[0]), "#") {
		t.Fatalf("the first document is not the header comment: %q", docs[0])
	}
	return o
}

// TestCheckedInManifests: the manifests in kubernetes/ are what the
// generator prints, so that they never drift from the command.
func TestCheckedInManifests(t *testing.T) {
	file, err := os.ReadFile("kubernetes/starwire.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if gen := manifests(t); !bytes.Equal(gen, file) {
		t.Fatal("kubernetes/starwire.yaml is not what \"starwire cluster manifests\" prints; regenerate it: go run ./cmd/starwire cluster manifests > deploy/kubernetes/starwire.yaml")
	}
	checkCluster(t, file, "starwire", "default", map[string]int{"chief": 1, "ps": 2, "worker": 2}, true)
}

// TestGeneratedManifests checks other shapes, and a cluster without AF_XDP.
func TestGeneratedManifests(t *testing.T) {
	data := manifests(t, "--name", "ctr", "--namespace", "train", "--ps", "3", "--workers", "5", "--afxdp=false")
	checkCluster(t, data, "ctr", "train", map[string]int{"chief": 1, "ps": 3, "worker": 5}, false)
}

// TestManifestsAFXDPModes: --afxdp takes serve's values; "on" makes each
// task refuse to start without AF_XDP, "off" is the old "false".
func TestManifestsAFXDPModes(t *testing.T) {
	sizes := map[string]int{"chief": 1, "ps": 2, "worker": 2}
	on := manifests(t, "--afxdp", "on")
	checkCluster(t, on, "starwire", "default", sizes, true)
	for _, p := range decode(t, on).pods {
		args := p.Spec.Containers[0].Args
		if i := slices.Index(args, "--afxdp"); (args[0] == "serve") != (i > 0 && i+1 < len(args) && args[i+1] == "on") {
			t.Errorf("pod %s: args %q with --afxdp on", p.Name, args)
		}
	}
	if off := manifests(t, "--afxdp", "off"); !bytes.Equal(off, manifests(t, "--afxdp=false")) {
		t.Error("--afxdp off and --afxdp=false make different manifests")
	}
	if auto := manifests(t, "--afxdp", "auto"); !bytes.Equal(auto, manifests(t)) {
		t.Error("--afxdp auto is not the default")
	}
}

// checkCluster decodes the manifests and checks they make the cluster
// asked for, and that the cluster spec and the endpoint map the tasks
// compute agree with the Services.
func checkCluster(t *testing.T, data []byte, name, ns string, sizes map[string]int, afxdp bool) {
	t.Helper()
	o := decode(t, data)
	total := 0
	for _, n := range sizes {
		total += n
	}
	if len(o.pods) != total || len(o.services) != total {
		t.Fatalf("%d pods and %d services, want %d of each", len(o.pods), len(o.services), total)
	}
	var spec cluster.Spec
	for _, p := range o.pods {
		job, idx := p.Labels["training.kubeflow.org/replica-type"], p.Labels["training.kubeflow.org/replica-index"]
		if p.Name != name+"-"+job+"-"+idx || p.Namespace != ns || p.Labels["training.kubeflow.org/job-name"] != name {
			t.Errorf("pod %s/%s labelled %v", p.Namespace, p.Name, p.Labels)
		}
		checkService(t, o, p)
		cfg := checkContainers(t, p, afxdp)
		if cfg.TaskType != job || strconv.Itoa(cfg.TaskIndex) != idx {
			t.Errorf("pod %s: TF_CONFIG's task is %s %d", p.Name, cfg.TaskType, cfg.TaskIndex)
		}
		if spec.Len() == 0 {
			spec = cfg.Cluster
		} else if !spec.Equal(cfg.Cluster) {
			t.Errorf("pod %s: TF_CONFIG's cluster %v differs from others' %v", p.Name, cfg.Cluster, spec)
		}
	}
	// The spec has each job's replicas, each at its Service's DNS name and
	// gRPC port.
	for job, n := range sizes {
		if got := spec.NumTasks(job); got != n {
			t.Errorf("the cluster spec has %d %s tasks, want %d", got, job, n)
		}
		for i := range n {
			svc := o.services[name+"-"+job+"-"+strconv.Itoa(i)]
			addr, err := spec.Lookup(job, i)
			if svc == nil || err != nil {
				t.Errorf("%s %d: service %v, address %v", job, i, svc, err)
				continue
			}
			if want := svc.Name + "." + ns + ".svc:" + strconv.Itoa(int(port(t, svc, "grpc", corev1.ProtocolTCP))); addr != want {
				t.Errorf("%s %d is at %s in the spec, want its Service's %s", job, i, addr, want)
			}
		}
	}
	if got := len(spec.Jobs()); got != len(sizes) {
		t.Errorf("the cluster spec has jobs %v", spec.Jobs())
	}
	checkEndpointMap(t, o, spec)
}

// checkService checks p's headless Service selects p alone.
func checkService(t *testing.T, o objects, p *corev1.Pod) {
	t.Helper()
	svc := o.services[p.Name]
	if svc == nil {
		t.Errorf("pod %s has no Service", p.Name)
		return
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses || svc.Namespace != p.Namespace {
		t.Errorf("Service %s: clusterIP %q, publishNotReadyAddresses %v: want a headless Service publishing before readiness", svc.Name, svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	for _, q := range o.pods {
		selected := len(svc.Spec.Selector) > 0
		for k, v := range svc.Spec.Selector {
			selected = selected && q.Labels[k] == v
		}
		if selected != (q == p) {
			t.Errorf("Service %s selects pod %s: %v", svc.Name, q.Name, selected)
		}
	}
}

// checkContainers checks p's init and main containers and returns its
// TF_CONFIG.
func checkContainers(t *testing.T, p *corev1.Pod, afxdp bool) cluster.TFConfig {
	t.Helper()
	if len(p.Spec.InitContainers) != 1 || len(p.Spec.Containers) != 1 {
		t.Fatalf("pod %s: %d init containers and %d containers", p.Name, len(p.Spec.InitContainers), len(p.Spec.Containers))
	}
	init, main := p.Spec.InitContainers[0], p.Spec.Containers[0]
	tf := env(main, "TF_CONFIG")
	if tf == "" || env(init, "TF_CONFIG") != tf {
		t.Errorf("pod %s: the init step and the task see different TF_CONFIGs", p.Name)
	}
	cfg, err := cluster.ParseTFConfig([]byte(tf))
	if err != nil {
		t.Fatalf("pod %s: %v", p.Name, err)
	}
	// The init step writes the map (resolving names to the pods' IPs) to
	// the file the task reads, on a volume both mount.
	mapPath := env(main, "TF_SEASTAR_ENDPOINT_MAP_PATH")
	if want := []string{"cluster", "endpoints", "--resolve", "--out", mapPath}; mapPath == "" || !slices.Equal(init.Args, want) {
		t.Errorf("pod %s: init args %q, want %q", p.Name, init.Args, want)
	}
	if m, i := mount(main, filepath.Dir(mapPath)), mount(init, filepath.Dir(mapPath)); m == "" || m != i || i == "" {
		t.Errorf("pod %s: the map's directory is mounted from %q by the task and %q by the init step", p.Name, m, i)
	}
	if init.Image != main.Image || main.Image == "" {
		t.Errorf("pod %s: images %q and %q", p.Name, init.Image, main.Image)
	}
	serves := cfg.TaskType != "chief"
	switch {
	case !serves:
		if len(main.Args) == 0 || main.Args[0] != "train" {
			t.Errorf("chief %s runs %q, want starwire train", p.Name, main.Args)
		}
	case len(main.Args) == 0 || main.Args[0] != "serve":
		t.Errorf("pod %s runs %q, want starwire serve", p.Name, main.Args)
	default:
		checkProbes(t, p, main)
	}
	caps := []corev1.Capability{}
	if sc := main.SecurityContext; sc != nil && sc.Capabilities != nil {
		caps = sc.Capabilities.Add
	}
	if wantXDP := afxdp && serves; wantXDP != slices.Contains(main.Args, "--afxdp_iface") {
		t.Errorf("pod %s: args %q, AF_XDP %v", p.Name, main.Args, wantXDP)
	} else if wantXDP {
		for _, c := range []corev1.Capability{"NET_ADMIN", "BPF", "NET_RAW", "IPC_LOCK"} {
			if !slices.Contains(caps, c) {
				t.Errorf("pod %s serves over AF_XDP without %s", p.Name, c)
			}
		}
		if sc := main.SecurityContext; sc.RunAsUser == nil || *sc.RunAsUser != 0 {
			t.Errorf("pod %s: added capabilities reach only root's processes", p.Name)
		}
	} else if len(caps) > 0 {
		t.Errorf("pod %s adds capabilities %v without AF_XDP", p.Name, caps)
	}
	return cfg
}

// checkProbes checks a serving task's probes ask grpc.health.v1 on its
// gRPC port for the task's health.
func checkProbes(t *testing.T, p *corev1.Pod, c corev1.Container) {
	t.Helper()
	grpcPort := int32(0)
	for _, cp := range c.Ports {
		if cp.Name == "grpc" && cp.Protocol == corev1.ProtocolTCP {
			grpcPort = cp.ContainerPort
		}
	}
	for what, pr := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if pr == nil || pr.GRPC == nil || pr.GRPC.Port != grpcPort || grpcPort == 0 || (pr.GRPC.Service != nil && *pr.GRPC.Service != "") {
			t.Errorf("pod %s: %s probe %+v, want grpc.health.v1 on port %d", p.Name, what, pr, grpcPort)
		}
	}
}

// checkEndpointMap runs the init step's command (without resolving names,
// which only the cluster's DNS can) and checks the map it writes gives
// every task of the spec a starwire address on its Service's starwire
// port, TCP and UDP.
func checkEndpointMap(t *testing.T, o objects, spec cluster.Spec) {
	t.Helper()
	var tf string
	for _, p := range o.pods {
		tf = env(p.Spec.Containers[0], "TF_CONFIG")
		break
	}
	out := filepath.Join(t.TempDir(), ".endpoint_map")
	cmd := exec.Command(starwire(t), "cluster", "endpoints", "--out", out)
	cmd.Env = append(os.Environ(), "TF_CONFIG="+tf)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cluster endpoints: %v: %s", err, b)
	}
	m, err := cluster.ReadEndpointMap(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CheckCluster(spec); err != nil {
		t.Error(err)
	}
	if m.Len() != spec.Len() {
		t.Errorf("the map has %d entries for %d tasks", m.Len(), spec.Len())
	}
	for grpcAddr, star := range m.All() {
		svcName, _, _ := strings.Cut(grpcAddr, ".")
		svc := o.services[svcName]
		if svc == nil {
			t.Errorf("map entry %s=%s names no Service", grpcAddr, star)
			continue
		}
		host, _, _ := strings.Cut(grpcAddr, ":")
		tcp, udp := port(t, svc, "starwire", corev1.ProtocolTCP), port(t, svc, "starwire-afxdp", corev1.ProtocolUDP)
		if want := host + ":" + strconv.Itoa(int(tcp)); star != want || tcp != udp {
			t.Errorf("map entry %s=%s, want %s (Service ports TCP %d, UDP %d)", grpcAddr, star, want, tcp, udp)
		}
	}
}

func port(t *testing.T, svc *corev1.Service, name string, proto corev1.Protocol) int32 {
	t.Helper()
	for _, p := range svc.Spec.Ports {
		if p.Name == name && p.Protocol == proto {
			return p.Port
		}
	}
	t.Errorf("Service %s has no %s port %s", svc.Name, proto, name)
	return 0
}

func env(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// mount returns the volume c mounts at dir.
func mount(c corev1.Container, dir string) string {
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir {
			return m.Name
		}
	}
	return ""
}

// TestImageIsStatic: the binary the Dockerfile builds (CGO_ENABLED=0)
// needs no dynamic loader, so it runs on the distroless static base the
// Dockerfile's last stage uses.
func TestImageIsStatic(t *testing.T) {
	f, err := elf.Open(starwire(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the CGO_ENABLED=0 build asks for a dynamic loader")
		}
	}
	df, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var froms []string
	for _, l := range strings.Split(string(df), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "FROM" {
			froms = append(froms, f[1])
		}
	}
	if len(froms) < 2 || !strings.Contains(froms[len(froms)-1], "static") ||
		!strings.Contains(string(df), "CGO_ENABLED=0 go build") || !strings.Contains(string(df), "./cmd/starwire") {
		t.Errorf("the Dockerfile is not a multi-stage static build of ./cmd/starwire onto a static base: stages %v", froms)
	}
}
