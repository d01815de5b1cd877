package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
	"unsafe"

	"github.com/starwire/starwire/internal/bufpool"
)

// encode returns m's complete frame as one byte slice.
func encode(t testing.TB, m *Message) []byte {
	t.Helper()
	b, err := AppendHead(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Tensors {
		b = append(b, m.Tensors[i].Data...)
	}
	return b
}

// decode parses one frame from b the way a stream transport does: header,
// head, pooled destinations, then the payload copied into them.
func decode(b []byte, lim *Limits) (*Inbound, error) {
	h, err := ParseHeader(b, lim)
	if err != nil {
		return nil, err
	}
	b = b[HeaderSize:]
	in := NewInbound()
	head := in.Begin(&h)
	if len(b) < len(head) {
		in.Release()
		return nil, fmt.Errorf("head: %w", ErrShort)
	}
	b = b[copy(head, b):]
	if err := in.ParseDescs(); err != nil {
		in.Release()
		return nil, err
	}
	in.AllocPooled()
	if err := in.CheckAlloc(); err != nil {
		in.Release()
		return nil, err
	}
	for i := range in.Tensors {
		dst := in.Tensors[i].Data
		if len(b) < len(dst) {
			in.Release()
			return nil, fmt.Errorf("tensor %d: %w", i, ErrShort)
		}
		b = b[copy(dst, b):]
	}
	if len(b) != 0 {
		in.Release()
		return nil, fmt.Errorf("%d trailing bytes: %w", len(b), ErrMalformed)
	}
	return in, nil
}

func TestHeaderRoundTripEveryKind(t *testing.T) {
	for k := KindRequest; k < kindEnd; k++ {
		h := Header{Kind: k, Flags: 0xbeef, Method: 0xdeadbeef, Status: Unavailable,
			CallID: math.MaxUint64 - uint64(k), MetaLen: 5, Timeout: 1e9}
		b := AppendHeader(nil, &h)
		if len(b) != HeaderSize {
			t.Fatalf("%v: header is %d bytes", k, len(b))
		}
		got, err := ParseHeader(b, nil)
		if err != nil {
			t.Fatalf("%v: %v", k, err)
		}
		if got != h {
			t.Errorf("%v: got %+v, want %+v", k, got, h)
		}
	}
}

func TestParseHeaderRejects(t *testing.T) {
	good := AppendHeader(nil, &Header{Kind: KindRequest, Tensors: 1, DescLen: 16, PayloadLen: 4})
	mutate := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	lim := &Limits{MaxMeta: 100, MaxTensors: 2, MaxPayload: 1000}
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"short", good[:HeaderSize-1], ErrShort},
		{"magic", mutate(func(b []byte) { b[0] = 'X' }), ErrMagic},
		{"version", mutate(func(b []byte) { b[2] = 9 }), ErrVersion},
		{"kind zero", mutate(func(b []byte) { b[3] = 0 }), ErrKind},
		{"kind unknown", mutate(func(b []byte) { b[3] = 200 }), ErrKind},
		{"meta too large", mutate(func(b []byte) { b[24] = 101 }), ErrTooLarge},
		{"too many tensors", mutate(func(b []byte) { b[6], b[28] = 3, 48 }), ErrTooLarge},
		{"payload past any tensor", mutate(func(b []byte) { b[37] = 1 }), ErrMalformed},
		{"payload too large", mutate(func(b []byte) { b[33] = 4 }), ErrTooLarge},
		{"descriptors too long", mutate(func(b []byte) { b[29] = 0xff }), ErrMalformed},
		{"descriptors too short", mutate(func(b []byte) { b[28] = 15 }), ErrMalformed},
	}
	if _, err := ParseHeader(good, lim); err != nil {
		t.Fatalf("good header: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseHeader(tt.b, lim); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestTensorRoundTripEveryDType(t *testing.T) {
	var dtypes []DataType
	for d := DTFloat; d <= DTUint64; d++ {
		if d.valid() {
			dtypes = append(dtypes, d)
		}
	}
	shapes := [][]int64{
		nil,                      // rank 0: one element
		{0},                      // empty
		{3, 0, 5},                // empty in the middle
		{2, 3},                   // matrix
		{2, 1, 2, 1, 2, 1, 2, 1}, // more than 6 dims
	}
	for _, dt := range dtypes {
		for _, shape := range shapes {
			t.Run(fmt.Sprintf("%v%v", dt, shape), func(t *testing.T) {
				src := makeTensor(dt, shape)
				m := &Message{Header: Header{Kind: KindResponse, CallID: 42}, Meta: []byte("meta"), Tensors: []Tensor{src}}
				in, err := decode(encode(t, m), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer in.Release()
				got := in.Tensors[0]
				if got.DType != dt || fmt.Sprint(got.Shape) != fmt.Sprint(shapeOrEmpty(shape)) || !bytes.Equal(got.Data, src.Data) {
					t.Fatalf("got %v%v %d bytes, want %v%v %d bytes", got.DType, got.Shape, len(got.Data), dt, shape, len(src.Data))
				}
				if string(in.Meta) != "meta" || in.Header.CallID != 42 {
					t.Fatalf("meta %q call %d", in.Meta, in.Header.CallID)
				}
				if len(got.Data) > 0 && uintptr(unsafe.Pointer(&got.Data[0]))%bufpool.Align != 0 {
					t.Fatal("received tensor is not aligned")
				}
			})
		}
	}
}

func shapeOrEmpty(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return s
}

func makeTensor(dt DataType, shape []int64) Tensor {
	n, _ := numElements(shape)
	if dt == DTString {
		elems := make([][]byte, n)
		for i := range elems {
			elems[i] = bytes.Repeat([]byte{byte('a' + i%26)}, i%300)
		}
		return Tensor{DType: dt, Shape: shape, Data: AppendStrings(nil, elems)}
	}
	data := make([]byte, int(n)*dt.Size())
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	return Tensor{DType: dt, Shape: shape, Data: data}
}

func TestHugeDims(t *testing.T) {
	tests := []struct {
		shape  []int64
		nbytes int
		ok     bool
	}{
		{[]int64{1 << 32, 0}, 0, true},
		{[]int64{0, 1 << 40, 1 << 40}, 0, true}, // product overflows, but a zero dim wins
		{[]int64{1 << 40, 1 << 40}, 0, false},   // overflows int64
		{[]int64{1 << 32}, 0, false},            // 4G elements in no bytes
		{[]int64{-1}, 0, false},
	}
	for _, tt := range tests {
		tensor := Tensor{DType: DTUint8, Shape: tt.shape, Data: make([]byte, tt.nbytes)}
		desc, err := AppendDesc(nil, &tensor)
		if (err == nil) != tt.ok {
			t.Errorf("AppendDesc(%v) err = %v, want ok=%v", tt.shape, err, tt.ok)
			continue
		}
		if !tt.ok {
			continue
		}
		var got Tensor
		if _, _, err := ParseDesc(desc, &got, nil); err != nil || fmt.Sprint(got.Shape) != fmt.Sprint(tt.shape) {
			t.Errorf("ParseDesc(%v) = %v, %v", tt.shape, got.Shape, err)
		}
	}
	// A descriptor announcing 2^33 bytes for 2^33 uint8 elements is valid
	// on its own; the frame limits decide whether to accept it.
	big := binaryDesc(DTUint8, []int64{1 << 33}, 1<<33)
	var got Tensor
	if _, _, err := ParseDesc(big, &got, nil); err != nil || got.ByteLen() != 1<<33 {
		t.Fatalf("8 GiB descriptor: %v, %d", err, got.ByteLen())
	}
	h := Header{Kind: KindRequest, Tensors: 1, DescLen: uint32(len(big)), PayloadLen: 1 << 33}
	if _, err := ParseHeader(AppendHeader(nil, &h), nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("8 GiB payload under default limits: %v", err)
	}
}

// binaryDesc builds a descriptor without AppendDesc's checks, to describe
// tensors whose bytes the test cannot afford.
func binaryDesc(dt DataType, shape []int64, nbytes uint64) []byte {
	t := Tensor{DType: DTUint8, Shape: shape}
	b, _ := AppendDesc(nil, &Tensor{DType: DTUint8, Shape: []int64{0}})
	b = b[:0]
	b = append(b, byte(dt), 0, 0, 0, 0, 0, byte(len(shape)), 0)
	for i := 0; i < 8; i++ {
		b = append(b, byte(nbytes>>(8*i)))
	}
	for _, d := range t.Shape {
		for i := 0; i < 8; i++ {
			b = append(b, byte(uint64(d)>>(8*i)))
		}
	}
	return b
}

func TestDescRejectsMismatch(t *testing.T) {
	tests := []struct {
		name string
		desc []byte
		want error
	}{
		{"float short", binaryDesc(DTFloat, []int64{2}, 7), ErrShape},
		{"int64 long", binaryDesc(DTInt64, []int64{1}, 9), ErrShape},
		{"resource", binaryDesc(DTResource, nil, 0), ErrDType},
		{"unknown dtype", binaryDesc(99, nil, 4), ErrDType},
		{"strings too few bytes", binaryDesc(DTString, []int64{3}, 2), ErrShape},
		{"truncated dims", binaryDesc(DTFloat, []int64{2, 2}, 16)[:20], ErrShort},
		{"truncated fixed", []byte{1, 0, 0}, ErrShort},
	}
	for _, tt := range tests {
		var got Tensor
		if _, _, err := ParseDesc(tt.desc, &got, nil); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestStrings(t *testing.T) {
	elems := [][]byte{[]byte(""), []byte("a"), bytes.Repeat([]byte("z"), 1000)}
	tensor := Tensor{DType: DTString, Shape: []int64{3}, Data: AppendStrings(nil, elems)}
	got, err := tensor.Strings(nil)
	if err != nil || len(got) != 3 || !bytes.Equal(got[2], elems[2]) {
		t.Fatalf("Strings = %q, %v", got, err)
	}
	tensor.Shape = []int64{2}
	if _, err := tensor.Strings(nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("extra element not caught: %v", err)
	}
	tensor.Shape = []int64{4}
	if _, err := tensor.Strings(nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("missing element not caught: %v", err)
	}
}

func TestFrameRejectsPayloadMismatch(t *testing.T) {
	m := &Message{Header: Header{Kind: KindRequest}, Tensors: []Tensor{makeTensor(DTFloat, []int64{4})}}
	b := encode(t, m)
	b[32]++ // PayloadLen one more than the tensors announce
	if _, err := decode(append(b, 0), nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
}

func TestSteadyStateDecodeAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are asserted in the run without -race")
	}
	m := &Message{Header: Header{Kind: KindResponse}, Meta: []byte("x"),
		Tensors: []Tensor{makeTensor(DTFloat, []int64{16, 16}), makeTensor(DTInt64, []int64{3})}}
	frame := encode(t, m)
	head := make([]byte, 0, 256)
	run := func() {
		var err error
		if head, err = AppendHead(head[:0], m); err != nil {
			t.Fatal(err)
		}
		in, err := decode(frame, nil)
		if err != nil {
			t.Fatal(err)
		}
		in.Release()
	}
	run()
	if n := testing.AllocsPerRun(200, run); n != 0 {
		t.Fatalf("encode+decode allocates %v times per frame", n)
	}
}
