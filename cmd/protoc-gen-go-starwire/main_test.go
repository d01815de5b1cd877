package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/starwire/starwire/examples/greeter/greeterpb"
)

// repoRoot is the module's root directory.
func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestGeneratedCodeIsCurrent runs protoc with the plugin as the gen.sh
// scripts do and compares its output with the committed files, so a change
// to the plugin that is not regenerated (make generate) fails here.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("protoc is not installed; CI installs protobuf-compiler (.ci/run)")
		}
		t.Skip("protoc not installed (apt-get install protobuf-compiler)")
	}
	root := repoRoot(t)
	bin := filepath.Join(t.TempDir(), "protoc-gen-go-starwire")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build the plugin: %v\n%s", err, out)
	}
	out := t.TempDir()
	for _, c := range []struct {
		proto, opts, generated, committed string
	}{
		{"examples/greeter/greeterpb/greeter.proto", "paths=source_relative",
			"examples/greeter/greeterpb/greeter_starwire.pb.go", "examples/greeter/greeterpb/greeter_starwire.pb.go"},
		{"wire/tfpb/worker_service.proto",
			"module=github.com/starwire/starwire,package=github.com/starwire/starwire/handlers,method_names=short,raw=RunGraph,raw=RecvTensor,client=false",
			"handlers/worker_service_starwire.pb.go", "handlers/worker_service_starwire.pb.go"},
	} {
		cmd := exec.Command(protoc, "-I", ".", "--plugin=protoc-gen-go-starwire="+bin,
			"--go-starwire_out="+out, "--go-starwire_opt="+c.opts, c.proto)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("protoc %s: %v\n%s", c.proto, err, msg)
		}
		got, err := os.ReadFile(filepath.Join(out, c.generated))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(root, c.committed))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the plugin generates from %s: run make generate", c.committed, c.proto)
		}
	}
}

// run generates from the greeter's compiled descriptor with param, as
// protoc would hand it over (without comments).
func run(t *testing.T, param string) (string, error) {
	t.Helper()
	fd := protodesc.ToFileDescriptorProto(greeterpb.File_examples_greeter_greeterpb_greeter_proto)
	req := &pluginpb.CodeGeneratorRequest{
		FileToGenerate: []string{fd.GetName()},
		Parameter:      proto.String(param),
		ProtoFile:      []*descriptorpb.FileDescriptorProto{fd},
	}
	o := options{tensors: map[string]bool{}, raw: map[string]bool{}}
	gen, err := protogen.Options{ParamFunc: o.set}.New(req)
	if err != nil {
		return "", err
	}
	if err := generate(gen, o); err != nil {
		return "", err
	}
	resp := gen.Response()
	if resp.Error != nil {
		return "", &genError{resp.GetError()}
	}
	if len(resp.File) != 1 {
		t.Fatalf("%d files generated, want 1", len(resp.File))
	}
	return resp.File[0].GetContent(), nil
}

type genError struct{ msg string }

func (e *genError) Error() string { return e.msg }

// The options choose the method names and the methods' modes.
func TestOptions(t *testing.T) {
	for _, c := range []struct {
		param string
		want  []string
	}{
		{"paths=source_relative", []string{
			`SayHello: rpc.NewMethod("/greeter.Greeter/SayHello")`,
			"SayHello(ctx context.Context, req *HelloRequest) (*HelloReply, error)",
			"Scale(ctx context.Context, req *ScaleRequest) (*ScaleReply, error)",
			"rpc.HandleProto(srv.Scale)",
		}},
		{"paths=source_relative,method_names=short,tensors=Scale", []string{
			`SayHello: rpc.NewMethod("SayHello")`,
			"Scale(ctx context.Context, req *ScaleRequest, tensors []wire.Tensor, reply *rpc.Reply) (*ScaleReply, error)",
			"Scale(ctx context.Context, req *ScaleRequest, in *wire.Inbound, out *rpc.Response) (*ScaleReply, error)",
			"x.c.CallProtoTensors(ctx, GreeterStarwireMethods.Scale, req, tensors, resp, reply)",
			"rpc.HandleProtoTensors(srv.Scale)",
		}},
		{"paths=source_relative,raw=Greeter.SayHello", []string{
			"SayHello(ctx context.Context, req *rpc.Request, reply *rpc.Reply) error",
			"SayHello(ctx context.Context, in *wire.Inbound, out *rpc.Response) error",
			"s.Register(GreeterStarwireMethods.SayHello, srv.SayHello, opts(GreeterStarwireMethods.SayHello))",
		}},
		{"module=github.com/starwire/starwire,package=github.com/starwire/starwire/other/place", []string{
			"package place",
			`greeterpb "github.com/starwire/starwire/examples/greeter/greeterpb"`,
			"SayHello(ctx context.Context, req *greeterpb.HelloRequest) (*greeterpb.HelloReply, error)",
		}},
	} {
		got, err := run(t, c.param)
		if err != nil {
			t.Fatalf("%s: %v", c.param, err)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: output lacks %q:\n%s", c.param, w, got)
			}
		}
	}
	// client=false leaves the client out, and only it.
	got, err := run(t, "paths=source_relative,client=false")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "GreeterStarwireClient") || !strings.Contains(got, "RegisterGreeterStarwireServer") || !strings.Contains(got, "GreeterStarwireMethods = struct") {
		t.Errorf("client=false generated:\n%s", got)
	}
	for _, bad := range []string{"method_names=long", "colour=blue", "tensors=Scale,raw=Scale", "client=no"} {
		if _, err := run(t, bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
