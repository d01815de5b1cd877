// Command protoc-gen-go-starwire is a protoc plugin that generates starwire
// stubs for the services of .proto files: for each service S, a client
// interface SStarwireClient with its constructor over an *rpc.Client, a
// server interface SStarwireServer with RegisterSStarwireServer over an
// *rpc.Server, and SStarwireMethods, the service's methods as rpc.Methods.
// Messages stay the protobuf types protoc-gen-go generates.
//
//	protoc --go_out=. --go_opt=paths=source_relative \
//	    --go-starwire_out=. --go-starwire_opt=paths=source_relative greeter.proto
//
// A method's ID is rpc.MethodID of its name, by default gRPC's full method
// name ("/greeter.Greeter/SayHello"), so two services may share method names;
// method_names=short uses the bare name ("SayHello"), as starwire's own
// WorkerService does.
//
// A method moves tensors beside its protobufs in one of two ways, chosen by a
// line in its comment in the .proto or by the plugin's options:
//
//   - "starwire:tensors" (or tensors=Method): the client method takes the
//     request's tensors as raw segments and a *rpc.Reply the answer's
//     tensors land in; the server method gets the request's *wire.Inbound
//     (its Tensors) and the *rpc.Response to append tensors to. The
//     protobufs carry everything else.
//   - "starwire:raw" (or raw=Method): the methods see frames only: the
//     client sends an *rpc.Request, the server method is an rpc.Handler and
//     encodes and decodes the metadata itself (say, without allocating).
//
// Options (--go-starwire_opt, comma-separated): the standard paths= and
// module=; method_names=full|short; tensors=M and raw=M, repeatable, M a
// method name or Service.Method; package=IMPORTPATH generates into that Go
// package rather than the .proto's (it needs module=); client=false leaves
// the client out, for a package that has a hand-written client of its own
// (starwire's WorkerService: handlers.StarCaller).
package main

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/types/pluginpb"
)

// options are the plugin's own parameters.
type options struct {
	shortNames   bool
	noClient     bool
	tensors, raw map[string]bool
	importPath   string
}

func main() {
	o := options{tensors: map[string]bool{}, raw: map[string]bool{}}
	protogen.Options{ParamFunc: o.set}.Run(func(gen *protogen.Plugin) error {
		return generate(gen, o)
	})
}

// set parses one of the plugin's own parameters.
func (o *options) set(name, value string) error {
	switch name {
	case "method_names":
		switch value {
		case "full":
			o.shortNames = false
		case "short":
			o.shortNames = true
		default:
			return fmt.Errorf("method_names=%q, want full or short", value)
		}
	case "tensors":
		o.tensors[value] = true
	case "raw":
		o.raw[value] = true
	case "package":
		o.importPath = value
	case "client":
		switch value {
		case "true":
			o.noClient = false
		case "false":
			o.noClient = true
		default:
			return fmt.Errorf("client=%q, want true or false", value)
		}
	default:
		return fmt.Errorf("unknown option %q", name)
	}
	return nil
}

// generate writes a _starwire.pb.go file for each file to generate that
// has services.
func generate(gen *protogen.Plugin, o options) error {
	gen.SupportedFeatures = uint64(pluginpb.CodeGeneratorResponse_FEATURE_PROTO3_OPTIONAL)
	for _, f := range gen.Files {
		if !f.Generate || len(f.Services) == 0 {
			continue
		}
		if err := generateFile(gen, f, o); err != nil {
			return err
		}
	}
	return nil
}

// mode is how a method moves its messages.
type mode int

const (
	modeProto   mode = iota // protobufs only
	modeTensors             // protobufs and raw tensor segments
	modeRaw                 // frames: the caller encodes and decodes
)

// methodMode says how m moves its messages, from its comment or options.
func (o options) methodMode(s *protogen.Service, m *protogen.Method) (mode, error) {
	names := []string{m.GoName, string(m.Desc.Name()), s.GoName + "." + m.GoName, string(s.Desc.Name()) + "." + string(m.Desc.Name())}
	tensors, raw := false, false
	for _, n := range names {
		tensors = tensors || o.tensors[n]
		raw = raw || o.raw[n]
	}
	for _, line := range strings.Split(string(m.Comments.Leading)+string(m.Comments.Trailing), "\n") {
		switch strings.TrimSpace(line) {
		case "starwire:tensors":
			tensors = true
		case "starwire:raw":
			raw = true
		}
	}
	switch {
	case tensors && raw:
		return 0, fmt.Errorf("%s: both tensors and raw", m.Desc.FullName())
	case tensors:
		return modeTensors, nil
	case raw:
		return modeRaw, nil
	}
	return modeProto, nil
}

// methodName is the name m's ID is derived from.
func (o options) methodName(s *protogen.Service, m *protogen.Method) string {
	if o.shortNames {
		return string(m.Desc.Name())
	}
	return fmt.Sprintf("/%s/%s", s.Desc.FullName(), m.Desc.Name())
}
