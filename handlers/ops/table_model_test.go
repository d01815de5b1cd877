package ops

import (
	"encoding/binary"
	"testing"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
)

// FuzzTablesAgainstMap runs a program of inserts, removes, lookups,
// exports and imports on a MutableHashTable and a MutableDenseHashTable
// (4 buckets to start, so that it grows, with removes leaving deleted
// buckets in probe sequences) beside a Go map, and checks after each step
// that both tables answer as the map does. Each 3 bytes of the input are
// one step: an operation and a key among 64 (so keys repeat and collide).
func FuzzTablesAgainstMap(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 9, 0, 1, 1, 0, 0, 1, 0, 2, 0, 0})
	f.Add([]byte{0, 3, 1, 0, 11, 2, 0, 19, 3, 1, 3, 0, 0, 19, 4, 3, 0, 0, 4, 0, 0})
	f.Fuzz(func(t *testing.T, prog []byte) {
		runTableProgram(t, prog)
	})
}

// TestTablesAgainstMap runs a long fixed program of FuzzTablesAgainstMap.
func TestTablesAgainstMap(t *testing.T) {
	prog := make([]byte, 3*5000)
	x := uint64(1)
	for i := range prog {
		x = x*6364136223846793005 + 1442695040888963407
		prog[i] = byte(x >> 56)
	}
	runTableProgram(t, prog)
}

func runTableProgram(t *testing.T, prog []byte) {
	hash, err := newHashTable(tableMeta{name: "h", kind: hashOfScalars, keyType: wire.DTInt64, valueType: wire.DTFloat, keyShape: []int64{}, valueShape: []int64{}})
	if err != nil {
		t.Fatal(err)
	}
	dense, err := newDenseTable(tableMeta{name: "d", kind: denseHash, keyType: wire.DTInt64, valueType: wire.DTFloat, valueShape: []int64{}},
		scalarInt64(-1), scalarInt64(-2), 4, 0.8)
	if err != nil {
		t.Fatal(err)
	}
	tables := []lookupTable{hash, dense}
	model := map[int64]float32{}
	key := func(b byte) int64 { return int64(b%64) * 8 } // multiples of 8 share low bits
	for step := 0; step+3 <= len(prog); step += 3 {
		op, k, v := prog[step]%5, key(prog[step+1]), float32(prog[step+2])
		keys := tensor.Owned(wire.DTInt64, []int64{1}, 8)
		binary.LittleEndian.PutUint64(keys.Data, uint64(k))
		vals := tensor.Owned(wire.DTFloat, []int64{1}, 4)
		tensor.View[float32](vals.Data)[0] = v
		for _, tab := range tables {
			switch op {
			case 0, 1:
				err = tab.insert(&keys, &vals)
			case 2:
				err = tab.remove(&keys)
			case 3: // export, then import what was exported
				var ek, ev wire.Tensor
				if ek, ev, err = tab.export(); err == nil {
					if err = tab.checkImport(&ek, &ev); err == nil {
						err = tab.importValues(&ek, &ev)
					}
					ek.Buf.Release()
					ev.Buf.Release()
				}
			}
			if err != nil {
				t.Fatalf("step %d: %s: op %d of key %d: %v", step/3, tab.meta().name, op, k, err)
			}
		}
		switch op {
		case 0, 1:
			model[k] = v
		case 2:
			delete(model, k)
		}
		checkAgainstModel(t, step/3, tables, model)
	}
}

// checkAgainstModel looks every key of the program up in the tables.
func checkAgainstModel(t *testing.T, step int, tables []lookupTable, model map[int64]float32) {
	keys := tensor.Owned(wire.DTInt64, []int64{64}, 64*8)
	for i := range 64 {
		tensor.View[int64](keys.Data)[i] = int64(i) * 8
	}
	def := tensor.Owned(wire.DTFloat, []int64{}, 4)
	tensor.View[float32](def.Data)[0] = -1
	for _, tab := range tables {
		out, err := tab.find(&keys, &def, []int64{64})
		if err != nil {
			t.Fatalf("step %d: %s: find: %v", step, tab.meta().name, err)
		}
		for i, got := range tensor.View[float32](out.Data) {
			want, ok := model[int64(i)*8]
			if !ok {
				want = -1
			}
			if got != want {
				t.Fatalf("step %d: %s: key %d = %v, want %v", step, tab.meta().name, i*8, got, want)
			}
		}
		out.Buf.Release()
		if n := tab.size(); n != int64(len(model)) {
			t.Fatalf("step %d: %s: size %d, want %d", step, tab.meta().name, n, len(model))
		}
	}
}
