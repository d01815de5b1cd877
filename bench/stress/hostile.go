package stress

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"time"

	"github.com/starwire/starwire/wire"
)

// ClaimPayload returns the head of a request frame (header and one tensor
// descriptor, no metadata) announcing a DT_UINT8 tensor of n bytes.
func ClaimPayload(method uint32, n uint64) []byte {
	h := wire.Header{Kind: wire.KindRequest, Method: method, CallID: 1, Tensors: 1, DescLen: 24, PayloadLen: n}
	b := wire.AppendHeader(nil, &h)
	// The descriptor as wire/tensor.go lays it out: dtype u32 | flags u16 |
	// rank u16 | byte length u64 | one dimension i64.
	b = binary.LittleEndian.AppendUint32(b, uint32(wire.DTUint8))
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint16(b, 1)
	b = binary.LittleEndian.AppendUint64(b, n)
	return binary.LittleEndian.AppendUint64(b, n)
}

// ClaimMeta returns a request header announcing n bytes of metadata.
func ClaimMeta(method uint32, n uint32) []byte {
	return wire.AppendHeader(nil, &wire.Header{Kind: wire.KindRequest, Method: method, CallID: 1, MetaLen: n})
}

// GenRequests returns n request frames asking MethodGen for size bytes each.
func GenRequests(n, size int) []byte {
	var b []byte
	for i := range n {
		m := wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: MethodGen.ID, CallID: uint64(i + 1)},
			Meta: Args{Seed: uint64(i), N: uint64(size)}.Append(nil)}
		b, _ = wire.AppendHead(b, &m) // no tensors: the head is the frame
	}
	return b
}

// An Attack is a hostile peer: Run attacks the server at addr until ctx
// ends and returns how many connections it opened.
type Attack struct {
	Name string
	Run  func(ctx context.Context, addr string) (conns int, err error)
}

// holdFor is how long an attack keeps each hostile connection open, so
// that several rounds fit in a measurement window.
const holdFor = 300 * time.Millisecond

// maxRounds bounds the connections of attacks that open one after another.
const maxRounds = 20000

// Claim sends head, then up to send bytes of its body, holds the
// connection for hold, closes it, and starts again until ctx ends.
func Claim(name string, head []byte, send int) Attack {
	return Attack{Name: name, Run: func(ctx context.Context, addr string) (int, error) {
		body := make([]byte, send)
		n := 0
		for ; ctx.Err() == nil && n < maxRounds; n++ {
			nc, err := dial(ctx, addr)
			if err != nil {
				return n, ignoreWindow(err)
			}
			nc.Write(head)
			nc.Write(body)
			hold(ctx, holdFor)
			nc.Close()
		}
		return n, nil
	}}
}

// NoRead sends n Gen requests for size bytes each on one connection with
// a small receive buffer and never reads the answers.
func NoRead(n, size int) Attack {
	return Attack{Name: fmt.Sprintf("no-read %d×%s", n, MiB(int64(size))), Run: func(ctx context.Context, addr string) (int, error) {
		nc, err := dial(ctx, addr)
		if err != nil {
			return 0, ignoreWindow(err)
		}
		defer nc.Close()
		nc.(*net.TCPConn).SetReadBuffer(4 << 10)
		if _, err := nc.Write(GenRequests(n, size)); err != nil {
			return 1, fmt.Errorf("stress: no-read attack: %w", err)
		}
		<-ctx.Done()
		return 1, nil
	}}
}

// HalfFrames opens connection after connection, each sending the first
// part of an echo request with a tensor of up to 8 MiB, then closing.
func HalfFrames(seed uint64) Attack {
	return Attack{Name: "half frames", Run: func(ctx context.Context, addr string) (int, error) {
		rng := rand.New(rand.NewPCG(seed, 1))
		n := 0
		for ; ctx.Err() == nil && n < maxRounds; n++ {
			size := 1 + rng.IntN(8<<20)
			frame := ClaimPayload(MethodEcho.ID, uint64(size))
			frame = append(frame, make([]byte, rng.IntN(size))...)
			nc, err := dial(ctx, addr)
			if err != nil {
				return n, ignoreWindow(err)
			}
			nc.Write(frame[:rng.IntN(len(frame))])
			nc.Close()
		}
		return n, nil
	}}
}

// Random opens connection after connection, each sending 64 KiB of random
// bytes; half of them start with a well-formed header whose other fields,
// lengths included, are random within the default limits.
func Random(seed uint64) Attack {
	return Attack{Name: "random bytes", Run: func(ctx context.Context, addr string) (int, error) {
		rng := rand.New(rand.NewPCG(seed, 2))
		buf := make([]byte, 64<<10)
		n := 0
		for ; ctx.Err() == nil && n < maxRounds; n++ {
			for i := 0; i < len(buf); i += 8 {
				binary.LittleEndian.PutUint64(buf[i:], rng.Uint64())
			}
			if n%2 == 0 {
				h := wire.Header{Kind: wire.Kind(1 + rng.IntN(8)), Method: MethodEcho.ID, CallID: rng.Uint64(),
					Tensors: uint16(rng.IntN(4)), MetaLen: rng.Uint32N(64 << 20), DescLen: rng.Uint32N(128),
					PayloadLen: rng.Uint64N(1 << 30)}
				wire.AppendHeader(buf[:0], &h)
			}
			nc, err := dial(ctx, addr)
			if err != nil {
				return n, ignoreWindow(err)
			}
			nc.Write(buf)
			nc.Close()
		}
		return n, nil
	}}
}

// errWindowOver ends an attack whose window closed while it dialled.
var errWindowOver = errors.New("stress: attack window over")

func ignoreWindow(err error) error {
	if errors.Is(err, errWindowOver) {
		return nil
	}
	return err
}

func dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil && (ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)) {
		// The dial's deadline is the window's end.
		return nil, errWindowOver
	}
	if err != nil {
		return nil, fmt.Errorf("stress: attack dial %s: %w", addr, err)
	}
	// A write the server does not read must not hold the attack past its
	// window.
	if dl, ok := ctx.Deadline(); ok {
		nc.SetWriteDeadline(dl)
	}
	return nc, nil
}

// hold waits for d or until ctx ends: it paces an attack, it does not
// wait for anything to happen.
func hold(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
