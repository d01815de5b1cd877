package staleness

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

// The parameter server's methods. Push carries the version as 8 bytes of
// metadata and the blob as one uint8 tensor; Pull carries the version the
// worker holds and is answered with the newest version and, when it is
// newer, its blob.
var (
	mPush = rpc.NewMethod("staleness.Push")
	mPull = rpc.NewMethod("staleness.Pull")
	// mWait is Pull answered only once a version newer than the worker's
	// is there: push mode's standing call.
	mWait = rpc.NewMethod("staleness.Wait")
)

// newStarServer returns a server of st's Push and Pull methods.
func newStarServer(st *store) *rpc.Server {
	srv := rpc.NewServer()
	srv.Register(mPush, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		if len(req.Meta) != 8 || len(req.Tensors) != 1 {
			return rpc.Errorf(wire.InvalidArgument, "push: %d metadata bytes and %d tensors, want 8 and 1", len(req.Meta), len(req.Tensors))
		}
		// Keep the receive buffer itself: the blob is never copied.
		t := &req.Tensors[0]
		buf := t.Buf
		t.Buf = nil
		st.put(binary.LittleEndian.Uint64(req.Meta), t.Data, buf)
		return nil
	}, rpc.HandlerOptions{Inline: true})
	srv.Register(mPull, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		if len(req.Meta) != 8 {
			return rpc.Errorf(wire.InvalidArgument, "pull: %d metadata bytes, want 8", len(req.Meta))
		}
		v, data, buf := st.get(binary.LittleEndian.Uint64(req.Meta))
		resp.Meta = binary.LittleEndian.AppendUint64(resp.Meta, v)
		if data != nil {
			// The server releases buf once the blob has been sent.
			resp.Tensors = append(resp.Tensors, wire.Tensor{DType: wire.DTUint8, Shape: []int64{int64(len(data))}, Data: data, Buf: buf})
		}
		return nil
	}, rpc.HandlerOptions{Inline: true})
	srv.Register(mWait, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		if len(req.Meta) != 8 {
			return rpc.Errorf(wire.InvalidArgument, "wait: %d metadata bytes, want 8", len(req.Meta))
		}
		v, data, buf, ok := st.await(ctx, binary.LittleEndian.Uint64(req.Meta))
		if !ok {
			return rpc.Errorf(wire.Cancelled, "wait: the run ended")
		}
		resp.Meta = binary.LittleEndian.AppendUint64(resp.Meta, v)
		// Every waiting worker's answer is the same memory: one reference
		// each, no copy.
		resp.Tensors = append(resp.Tensors, wire.Tensor{DType: wire.DTUint8, Shape: []int64{int64(len(data))}, Data: data, Buf: buf})
		return nil
	}, rpc.HandlerOptions{})
	return srv
}

// startStarwire serves st over starwire on a free loopback port.
func startStarwire(st *store) (addr string, stop func(), err error) {
	srv := newStarServer(st)
	tr := &tcp.Transport{}
	l, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("staleness: starwire server: %w", err)
	}
	go srv.Serve(l)
	return l.Addr().String(), func() { srv.Close() }, nil
}

// starwireConn is one peer's connection to the parameter server.
type starwireConn struct {
	c     *rpc.Client
	meta  [8]byte
	shape [1]int64
	reply rpc.Reply
}

// dialStarwire returns a connection to addr over tr (nil means TCP).
func dialStarwire(addr string, tr rpc.Transport) *starwireConn {
	if tr == nil {
		tr = &tcp.Transport{}
	}
	return &starwireConn{c: rpc.NewClient(addr, rpc.ClientOptions{Name: "parameter server", Transport: tr})}
}

func (s *starwireConn) push(ctx context.Context, version uint64, blob []byte) error {
	binary.LittleEndian.PutUint64(s.meta[:], version)
	s.shape[0] = int64(len(blob))
	req := rpc.Request{Meta: s.meta[:], Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: s.shape[:], Data: blob}}}
	err := s.c.Call(ctx, mPush, &req, &s.reply)
	s.reply.Release()
	return err
}

// pull lands a newer blob straight in dst, which must be the blob's size.
func (s *starwireConn) pull(ctx context.Context, have uint64, dst []byte) (uint64, bool, error) {
	return s.get(ctx, mPull, have, dst)
}

// wait is pull answered once a version newer than have is there.
func (s *starwireConn) wait(ctx context.Context, have uint64, dst []byte) (uint64, bool, error) {
	return s.get(ctx, mWait, have, dst)
}

func (s *starwireConn) get(ctx context.Context, m rpc.Method, have uint64, dst []byte) (uint64, bool, error) {
	binary.LittleEndian.PutUint64(s.meta[:], have)
	s.reply.Alloc = func(in *wire.Inbound) error {
		if len(in.Tensors) > 1 || (len(in.Tensors) == 1 && in.Tensors[0].ByteLen() != len(dst)) {
			return fmt.Errorf("staleness: pull answered with %d tensors, want one of %d bytes", len(in.Tensors), len(dst))
		}
		if len(in.Tensors) == 1 {
			in.Tensors[0].Data = dst
		}
		return nil
	}
	err := s.c.Call(ctx, m, &rpc.Request{Meta: s.meta[:]}, &s.reply)
	defer s.reply.Release()
	if err != nil {
		return 0, false, err
	}
	if len(s.reply.Meta) != 8 {
		return 0, false, fmt.Errorf("staleness: pull answered with %d metadata bytes, want 8", len(s.reply.Meta))
	}
	return binary.LittleEndian.Uint64(s.reply.Meta), len(s.reply.Tensors) == 1, nil
}

func (s *starwireConn) close() { s.c.Close() }
