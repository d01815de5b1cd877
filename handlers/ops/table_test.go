package ops_test

import (
	"slices"
	"strings"
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// An opCase is a graph run once, its fetches compared with values worked
// out by hand from TensorFlow's documented semantics.
type opCase struct {
	name    string
	nodes   []*tfpb.NodeDef
	fetches []string
	want    []wire.Tensor
}

// runCases runs every case in an Env of its own.
func runCases(t *testing.T, cases []opCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				for i := range tc.want {
					tc.want[i].Buf.Release()
				}
			}()
			out, err := Run(t, NewEnv(t), GraphDef(tc.nodes...), nil, tc.fetches...)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				checkTensor(t, tc.fetches[i], &out[i], &tc.want[i])
			}
		})
	}
}

// checkTensor compares dtype, shape and elements (floats within 1e-4).
func checkTensor(t *testing.T, name string, got, want *wire.Tensor) {
	t.Helper()
	if got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) {
		t.Fatalf("%s: got %v%v, want %v%v", name, got.DType, got.Shape, want.DType, want.Shape)
	}
	switch got.DType {
	case wire.DTFloat:
		if !ApproxEqual(Floats(got), Floats(want)) {
			t.Fatalf("%s: got %v, want %v", name, Floats(got), Floats(want))
		}
	case wire.DTDouble:
		g, w := tensor.View[float64](got.Data), tensor.View[float64](want.Data)
		for i := range w {
			if d := g[i] - w[i]; d < -1e-9 || d > 1e-9 {
				t.Fatalf("%s: got %v, want %v", name, g, w)
			}
		}
	default:
		if string(got.Data) != string(want.Data) {
			t.Fatalf("%s: got bytes %v, want %v", name, got.Data, want.Data)
		}
	}
}

// An errCase is a graph whose node "out" fails when built or run, with an
// error of code whose message contains msg and names the node.
type errCase struct {
	name  string
	nodes []*tfpb.NodeDef
	code  wire.Code
	msg   string
}

func runErrCases(t *testing.T, cases []errCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(t, NewEnv(t), GraphDef(tc.nodes...), nil) // every node runs
			if err == nil || status.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v (code %v), want %v containing %q", err, status.CodeOf(err), tc.code, tc.msg)
			}
			if !strings.Contains(err.Error(), `node "out"`) {
				t.Fatalf("error %q does not name the node", err)
			}
		})
	}
}

// I32 returns an int32 tensor, which the test releases.
func I32(shape []int64, vals ...int32) wire.Tensor { return Of(wire.DTInt32, shape, vals) }

// Bools returns a bool tensor, which the test releases.
func Bools(shape []int64, vals ...bool) wire.Tensor {
	b := make([]uint8, len(vals))
	for i, v := range vals {
		if v {
			b[i] = 1
		}
	}
	return Of(wire.DTBool, shape, b)
}

// F64 returns a double tensor, which the test releases.
func F64(shape []int64, vals ...float64) wire.Tensor { return Of(wire.DTDouble, shape, vals) }
