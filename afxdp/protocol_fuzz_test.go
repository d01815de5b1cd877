package afxdp_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/wire"
)

// FuzzProtocol drives a session through a link whose faults, and the
// frames sent over it, come from the fuzz input: every frame must arrive
// once, in order and intact, and every message must complete.
func FuzzProtocol(f *testing.F) {
	f.Add(uint64(1), uint8(0), uint8(0), uint8(0), []byte{1, 2, 3})
	f.Add(uint64(2), uint8(40), uint8(100), uint8(10), []byte{0, 255, 17, 200, 3})
	f.Add(uint64(3), uint8(80), uint8(0), uint8(25), []byte{255, 255, 255})
	f.Add(uint64(4), uint8(10), uint8(255), uint8(255), []byte{9, 0, 9, 0, 9, 0, 9})
	f.Fuzz(func(t *testing.T, seed uint64, loss, reorder, dup uint8, sizes []byte) {
		if len(sizes) > 32 {
			sizes = sizes[:32]
		}
		la, lb := afxdp.MemPair(memA, memB, afxdp.MemOptions{
			Loss: float64(loss) / 255 * 0.3, Reorder: float64(reorder) / 255 * 0.5, Duplicate: float64(dup) / 255 * 0.1,
			Seed: seed, MaxPayload: 200 + int(seed%1300),
		})
		opts := afxdp.Options{RTO: time.Millisecond, MaxRTO: 20 * time.Millisecond, Window: 16 + int(seed%512)}
		ea, eb := afxdp.NewEndpoint(la, opts), afxdp.NewEndpoint(lb, opts)
		defer ea.Close()
		defer eb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ca, err := ea.Dial(ctx, memB.String())
		if err != nil {
			t.Fatal(err)
		}
		cb, err := eb.Accept()
		if err != nil {
			t.Fatal(err)
		}
		rb := newCollector(len(sizes))
		go cb.Receive(rb)
		done := make(doneChan, len(sizes))
		want := make([][]byte, len(sizes))
		for i, b := range sizes {
			want[i] = pattern(int(b)*523, byte(i))
			m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: uint64(i)}, Meta: want[i][:min(len(want[i]), int(b)%64)], Done: done}
			if len(want[i]) > 0 {
				m.Tensors = []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(len(want[i]))}, Data: want[i]}}
			}
			if err := ca.Send(m); err != nil {
				t.Fatal(err)
			}
		}
		for i := range sizes {
			in := rb.next(t, 10*time.Second)
			if in.Err != nil || in.Header.CallID != uint64(i) {
				t.Fatalf("frame %d: call %d, %v", i, in.Header.CallID, in.Err)
			}
			if len(want[i]) > 0 && !bytes.Equal(in.Tensors[0].Data, want[i]) {
				t.Fatalf("frame %d differs", i)
			}
			in.Release()
		}
		for range sizes {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a message never completed")
			}
		}
	})
}
