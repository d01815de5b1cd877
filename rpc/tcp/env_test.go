package tcp

import (
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// TestMain fails the package when goroutines outlive the tests: every
// connection, reader, writer and drainer must end when its client or
// server closes. The shared reactors live as long as the process and do
// not count.
func TestMain(m *testing.M) {
	testwait.VerifyTestMain(m)
}

// The methods of the test server: Echo answers with the request's
// metadata, inline; Tensor with a copy of its tensors.
var (
	mEcho   = rpc.NewMethod("Echo")
	mTensor = rpc.NewMethod("Tensor")
)

type testEnv struct {
	srv    *rpc.Server
	addr   string
	client *rpc.Client
}

func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	return newTestEnvOn(t, &Transport{})
}

// newTestEnvOn serves the test methods over tr, with the server's fields
// set by configure (if any) before it serves, and dials it with a client.
func newTestEnvOn(t testing.TB, tr *Transport, configure ...func(*rpc.Server)) *testEnv {
	t.Helper()
	env := &testEnv{srv: rpc.NewServer()}
	for _, f := range configure {
		f(env.srv)
	}
	env.srv.Register(mEcho, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, rpc.HandlerOptions{Inline: true})
	env.srv.Register(mTensor, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		// Answer with a copy: an echo must not send back its receive buffer.
		for _, in := range req.Tensors {
			buf := wire.NewBuffer(len(in.Data))
			copy(buf.Bytes(), in.Data)
			resp.Tensors = append(resp.Tensors, wire.Tensor{DType: in.DType, Shape: append([]int64(nil), in.Shape...), Data: buf.Bytes(), Buf: buf})
		}
		return nil
	}, rpc.HandlerOptions{})
	l, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go env.srv.Serve(l)
	env.addr = l.Addr().String()
	env.client = rpc.NewClient(env.addr, rpc.ClientOptions{Transport: tr})
	t.Cleanup(func() {
		env.client.Close()
		env.srv.Close()
	})
	return env
}

// pattern fills b with bytes derived from seed (as rpc's tests do): one
// block drawn from seed, repeated, every 4 KiB stamped with its offset.
func pattern(b []byte, seed uint64) {
	const block, stamp = 64 << 10, 4 << 10
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	n := min(len(b), block) &^ 7
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for i := n; n > 0 && i < len(b); {
		i += copy(b[i:], b[:i])
	}
	for off := block; off+8 <= len(b); off += stamp {
		binary.LittleEndian.PutUint64(b[off:], uint64(off)^seed*0x9e3779b97f4a7c15)
	}
}

// readRawFrame reads one frame from r: its header, meta and payload.
func readRawFrame(r io.Reader) (wire.Header, []byte, []byte, error) {
	var hb [wire.HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return wire.Header{}, nil, nil, err
	}
	h, err := wire.ParseHeader(hb[:], nil)
	if err != nil {
		return h, nil, nil, err
	}
	head := make([]byte, int(h.MetaLen)+int(h.DescLen))
	if _, err := io.ReadFull(r, head); err != nil {
		return h, nil, nil, err
	}
	payload := make([]byte, h.PayloadLen)
	_, err = io.ReadFull(r, payload)
	return h, head[:h.MetaLen], payload, err
}
