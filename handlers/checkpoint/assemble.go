package checkpoint

import (
	"fmt"

	"github.com/starwire/starwire/wire"
)

// assembly builds a tensor of one box from parts holding other boxes.
// Numeric elements are copied as bytes; strings as element references,
// encoded once at the end.
type assembly struct {
	dt    wire.DataType
	want  box
	data  []byte   // numeric types
	elems [][]byte // strings
}

func newAssembly(dt wire.DataType, want box) *assembly {
	a := &assembly{dt: dt, want: want}
	if dt == wire.DTString {
		a.elems = make([][]byte, want.volume())
	} else {
		a.data = make([]byte, want.volume()*int64(dt.Size()))
	}
	return a
}

// copyFrom copies region from part, a tensor holding box src.
func (a *assembly) copyFrom(part wire.Tensor, region, src box) error {
	if a.dt == wire.DTString {
		elems, err := part.Strings(nil)
		if err != nil {
			return fmt.Errorf("%w: %w", err, ErrCorrupt)
		}
		copyBox(region, src, a.want, func(di, si, n int64) { copy(a.elems[di:di+n], elems[si:si+n]) })
		return nil
	}
	sz := int64(a.dt.Size())
	copyBox(region, src, a.want, func(di, si, n int64) {
		copy(a.data[di*sz:(di+n)*sz], part.Data[si*sz:(si+n)*sz])
	})
	return nil
}

func (a *assembly) tensor() wire.Tensor {
	data := a.data
	if a.dt == wire.DTString {
		size := 0
		for _, e := range a.elems {
			size += len(e) + 10
		}
		data = wire.AppendStrings(make([]byte, 0, size), a.elems)
	}
	return wire.Tensor{DType: a.dt, Shape: a.want.length, Data: data}
}

// extract returns the part want of t, a tensor holding box src.
func extract(t wire.Tensor, src, want box) (wire.Tensor, error) {
	a := newAssembly(t.DType, want)
	if err := a.copyFrom(t, want, src); err != nil {
		return wire.Tensor{}, err
	}
	return a.tensor(), nil
}
