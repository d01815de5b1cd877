package embedding

import (
	"encoding/binary"
	"testing"
)

// FuzzSelect feeds Select and Restore pieces of a checkpoint made of
// arbitrary ids, lengths and offsets, as a corrupt or hostile checkpoint
// gives them: neither may panic, and what Select accepts puts every row in
// its partition and restores into a table that holds exactly those rows.
func FuzzSelect(f *testing.F) {
	tab, _ := New(Options{Dim: 1, Slots: []float32{0}})
	_ = tab.Gather([]int64{1, 2, 1001, -7}, make([]float32, 4))
	s := tab.Snapshot()
	offsets, _ := s.Partition()
	seed := binary.LittleEndian.AppendUint64(nil, 3)
	for _, id := range s.IDs {
		seed = binary.LittleEndian.AppendUint64(seed, uint64(id))
	}
	for _, o := range offsets[:8] {
		seed = binary.LittleEndian.AppendUint32(seed, uint32(o))
	}
	f.Add(seed, uint8(0), uint8(1), true)
	f.Add(seed, uint8(1), uint8(2), false)
	f.Fuzz(func(t *testing.T, data []byte, k, n uint8, withOffsets bool) {
		if len(data) < 8 {
			return
		}
		rows := int(binary.LittleEndian.Uint64(data) % 64)
		data = data[8:]
		piece := &Snapshot{Dim: 1, Slots: make([][]float32, 1)}
		for i := 0; i < rows && len(data) >= 8; i++ {
			id := int64(binary.LittleEndian.Uint64(data))
			data = data[8:]
			piece.IDs = append(piece.IDs, id)
			piece.Values = append(piece.Values, float32(i))
			piece.Slots[0] = append(piece.Slots[0], float32(-i))
			piece.Freqs = append(piece.Freqs, int64(i))
			piece.Versions = append(piece.Versions, int64(i))
		}
		var offs []int32
		if withOffsets {
			offs = make([]int32, SavedParts+1)
			for p := 1; p <= SavedParts && len(data) >= 4; p++ {
				offs[p] = int32(binary.LittleEndian.Uint32(data))
				data = data[4:]
			}
			if len(data) == 0 { // the rest of the parts end where the rows do
				for p := range offs[1:] {
					offs[p+1] = max(offs[p+1], offs[p])
				}
			}
		}
		dst := &Snapshot{Dim: 1, Slots: make([][]float32, 1)}
		if err := piece.Select(dst, offs, nil, int(k), int(n)); err != nil {
			return
		}
		for _, id := range dst.IDs {
			if PartitionOf(id, int(n)) != int(k) {
				t.Fatalf("id %d selected into %d of %d, belongs in %d", id, k, n, PartitionOf(id, int(n)))
			}
		}
		fresh, _ := New(Options{Dim: 1, Slots: []float32{0}})
		if err := fresh.Restore(dst); err == nil && fresh.Len() != len(dst.IDs) {
			t.Fatalf("restored %d rows of %d", fresh.Len(), len(dst.IDs))
		}
	})
}
