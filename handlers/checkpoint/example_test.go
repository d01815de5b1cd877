package checkpoint_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/wire"
)

// A checkpoint in one shard, saved and read back as TensorFlow's Saver
// would: the files are TensorFlow's, which tf.train.load_checkpoint reads.
// Keep records it in the directory's state file, where Latest finds it.
func Example() {
	dir, err := os.MkdirTemp("", "ckpt")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	weights := make([]byte, 0, 12)
	for _, v := range []float32{0.5, -1, 2} {
		weights = binary.LittleEndian.AppendUint32(weights, math.Float32bits(v))
	}
	step := binary.LittleEndian.AppendUint64(nil, 100)
	prefix := filepath.Join(dir, "model.ckpt-100")
	w, err := checkpoint.NewWriter(prefix, 0, 1)
	if err != nil {
		panic(err)
	}
	if err := w.Add("dense/kernel", &wire.Tensor{DType: wire.DTFloat, Shape: []int64{3}, Data: weights}); err != nil {
		panic(err)
	}
	if err := w.Add("global_step", &wire.Tensor{DType: wire.DTInt64, Shape: []int64{}, Data: step}); err != nil {
		panic(err)
	}
	if err := w.Finish(); err != nil {
		panic(err)
	}
	if err := checkpoint.Keep(dir, prefix, 5); err != nil {
		panic(err)
	}

	latest, err := checkpoint.Latest(dir)
	if err != nil {
		panic(err)
	}
	r, err := checkpoint.Open(latest)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	fmt.Println(filepath.Base(latest))
	for _, e := range r.Entries() {
		fmt.Println(e.Name, e.DType, e.Shape)
	}
	t, err := r.Read("dense/kernel")
	if err != nil {
		panic(err)
	}
	for i := 0; i < len(t.Data); i += 4 {
		fmt.Print(math.Float32frombits(binary.LittleEndian.Uint32(t.Data[i:])), " ")
	}
	fmt.Println()
	// Output:
	// model.ckpt-100
	// dense/kernel float [3]
	// global_step int64 []
	// 0.5 -1 2
}
