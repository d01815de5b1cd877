package wire

import (
	"fmt"
	"sync"

	"github.com/starwire/starwire/internal/bufpool"
)

// An Inbound is a received frame. A transport fills it in three steps:
// Begin with the parsed header, which returns room for the metadata and
// descriptors; ParseDescs once that room is filled; then, after a Receiver's
// Alloc has given every tensor its Data, the tensor bytes in order.
//
// The Receiver that is handed an Inbound by Deliver owns it and calls Release
// when done. Release also releases the Buf of every tensor still in Tensors;
// to keep a tensor longer, take its Buf (set the field to nil) or Ref it.
type Inbound struct {
	Header  Header
	Meta    []byte   // valid until Release
	Tensors []Tensor // shapes valid until Release
	Err     error    // why the tensors could not be received; Meta is still valid

	head  *bufpool.Buffer // metadata and descriptors, when they outgrow small
	small [256]byte       // metadata and descriptors of small frames
	body  []byte          // whichever of the two holds them
	dims  []int64         // storage for the tensors' shapes
}

var inboundPool = sync.Pool{New: func() any { return new(Inbound) }}

// NewInbound returns an empty Inbound from a pool.
func NewInbound() *Inbound { return inboundPool.Get().(*Inbound) }

// Begin resets in for a frame with header h and returns the buffer into which
// the frame's metadata and descriptors (MetaLen+DescLen bytes) are to be read.
func (in *Inbound) Begin(h *Header) []byte {
	in.Header = *h
	in.Err = nil
	n := int(h.MetaLen) + int(h.DescLen)
	if n <= len(in.small) {
		in.body = in.small[:n]
	} else {
		in.head = bufpool.Get(n)
		in.body = in.head.Bytes()
	}
	in.Meta = in.body[:h.MetaLen]
	return in.body
}

// ParseDescs decodes the tensor descriptors that follow the metadata and
// checks that their byte lengths add up to the header's PayloadLen.
func (in *Inbound) ParseDescs() error {
	h := &in.Header
	b := in.body[h.MetaLen:]
	in.Tensors = in.Tensors[:0]
	// Every dimension costs 8 descriptor bytes, so this bounds all shapes
	// together and ParseDesc never has to grow the storage.
	if need := int(h.DescLen) / 8; cap(in.dims) < need {
		in.dims = make([]int64, 0, need)
	}
	dims := in.dims[:0]
	var total uint64
	for i := 0; i < int(h.Tensors); i++ {
		in.Tensors = append(in.Tensors, Tensor{})
		var err error
		b, dims, err = ParseDesc(b, &in.Tensors[i], dims)
		if err != nil {
			in.Tensors = in.Tensors[:i]
			return fmt.Errorf("wire: call %d tensor %d: %w", h.CallID, i, err)
		}
		total += uint64(in.Tensors[i].nbytes)
	}
	if len(b) != 0 {
		return fmt.Errorf("wire: call %d: %d bytes after the descriptors: %w", h.CallID, len(b), ErrMalformed)
	}
	if total != h.PayloadLen {
		return fmt.Errorf("wire: call %d: tensors of %d bytes in a payload of %d: %w", h.CallID, total, h.PayloadLen, ErrMalformed)
	}
	return nil
}

// AllocPooled gives every tensor without Data a pooled, aligned buffer of its
// size. It is the default a Receiver's Alloc can fall back to.
func (in *Inbound) AllocPooled() {
	for i := range in.Tensors {
		t := &in.Tensors[i]
		if t.Data == nil && t.nbytes > 0 {
			t.Buf = bufpool.Get(t.nbytes)
			t.Data = t.Buf.Bytes()
		} else if t.Data == nil {
			t.Data = []byte{}
		}
	}
}

// Prepare readies in for its tensor bytes once its head is in: it decodes
// the descriptors, asks r where the bytes go and checks the answer. On error
// it sets in.Err too; the transport then still reads or skips the payload and
// delivers in, so that the frame's call alone fails.
func (in *Inbound) Prepare(r Receiver) error {
	err := in.ParseDescs()
	if err == nil {
		err = r.Alloc(in)
	}
	if err == nil {
		err = in.CheckAlloc()
	}
	in.Err = err
	return err
}

// CheckAlloc verifies that a Receiver gave every tensor exactly the room its
// descriptor announced.
func (in *Inbound) CheckAlloc() error {
	for i := range in.Tensors {
		t := &in.Tensors[i]
		if len(t.Data) != t.nbytes || (t.Data == nil && t.nbytes > 0) {
			return fmt.Errorf("wire: call %d tensor %d: destination of %d bytes for %d: %w",
				in.Header.CallID, i, len(t.Data), t.nbytes, ErrShape)
		}
	}
	return nil
}

// Release returns the frame's buffers, and in itself, to their pools.
func (in *Inbound) Release() {
	for i := range in.Tensors {
		in.Tensors[i].Buf.Release()
		in.Tensors[i] = Tensor{}
	}
	in.Tensors = in.Tensors[:0]
	in.head.Release()
	in.head, in.body = nil, nil
	in.Meta = nil
	in.Err = nil
	inboundPool.Put(in)
}

// A Receiver takes frames off a connection. A transport calls Alloc once a
// frame's metadata and descriptors are known and before its tensor bytes
// arrive, so the bytes land directly in their final buffers; then it calls
// Deliver with the whole frame, or with in.Err set when the tensors could not
// be received (Alloc failed, or the data was bad). Deliver takes ownership of
// in. A transport calls Alloc and Deliver of one frame from one goroutine; a
// connection with several paths may deliver frames of different paths
// concurrently.
type Receiver interface {
	Alloc(in *Inbound) error
	Deliver(in *Inbound)
}

// A Throttle is a Receiver that may have no room for a frame, as a server
// holding calls back has none: a transport asks Room before it takes each
// frame and, when the answer is no, stops taking frames from its peer (a
// stream stops reading, a packet session shuts its window) and calls
// WaitRoom, which returns once there is room or with an error once closed
// is closed. Taking nothing is how a transport pushes back on its peer.
type Throttle interface {
	// Room reports whether a frame of payload tensor bytes may be taken.
	Room(payload uint64) bool
	WaitRoom(payload uint64, closed <-chan struct{}) error
}
