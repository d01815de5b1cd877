package wire_test

import (
	"fmt"

	"github.com/starwire/starwire/wire"
)

// A frame's head is built by appending; the tensor bytes follow it straight
// from the tensor's own memory, which is why they are not part of the head.
func ExampleAppendHead() {
	m := &wire.Message{
		Header: wire.Header{Kind: wire.KindResponse, CallID: 9},
		Meta:   []byte{0x10, 0x01},
		Tensors: []wire.Tensor{{
			DType: wire.DTFloat,
			Shape: []int64{2, 2},
			Data:  make([]byte, 16),
		}},
	}
	head, err := wire.AppendHead(nil, m)
	if err != nil {
		panic(err)
	}
	h, _ := wire.ParseHeader(head, nil)
	fmt.Println(len(head), h.Kind, h.Tensors, h.PayloadLen)
	// Output: 82 response 1 16
}
