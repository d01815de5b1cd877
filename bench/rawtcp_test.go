package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func startRaw(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewRawServer()
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	return l.Addr().String()
}

func TestCompleteFrames(t *testing.T) {
	frame := func(n int) []byte {
		return append(binary.LittleEndian.AppendUint32(nil, uint32(n)), make([]byte, n)...)
	}
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	tests := []struct {
		name       string
		b          []byte
		done, need int
	}{
		{"empty", nil, 0, 0},
		{"partial length", []byte{1, 0}, 0, 0},
		{"length only", frame(5)[:4], 0, 9},
		{"one", frame(5), 9, 0},
		{"empty frame", frame(0), 4, 0},
		{"two and a half", cat(frame(3), frame(1), frame(8)[:6]), 12, 12},
		{"two and a length byte", cat(frame(3), frame(1), []byte{7}), 12, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done, need := completeFrames(tt.b)
			if done != tt.done || need != tt.need {
				t.Errorf("completeFrames = %d, %d; want %d, %d", done, need, tt.done, tt.need)
			}
		})
	}
}

func TestRawEcho(t *testing.T) {
	addr := startRaw(t)
	e, err := DialRawEcho(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// Sizes around the server's read buffer make it grow and compact.
	for _, n := range []int{0, 1, 64, 4 << 10, rawReadSize - 4, rawReadSize, 3*rawReadSize + 17, 64} {
		req := echoPayload(n)
		resp := make([]byte, n)
		if err := e.Echo(req, resp); err != nil {
			t.Fatalf("echo of %d bytes: %v", n, err)
		}
		if !bytes.Equal(req, resp) {
			t.Fatalf("echo of %d bytes came back different", n)
		}
	}
}

func TestRawPipeline(t *testing.T) {
	addr := startRaw(t)
	tests := []struct {
		name              string
		n, size, window   int
		wantSamplesAtMost int
	}{
		{"one in flight", 100, 64, 1, 100},
		{"32 in flight", 5000, 64, 32, 5000},
		{"window over n", 10, 64, 32, 10},
		{"tiny frames", 1000, 0, 32, 1000},
		{"large frames", 200, 100 << 10, 8, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := DialRawPipeline(addr)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			lat := NewSamples(1 << 16)
			// Twice: a run leaves the connection ready for the next.
			for range 2 {
				if err := p.Run(tt.n, tt.size, tt.window, lat); err != nil {
					t.Fatal(err)
				}
			}
			if lat.Count() != 2*tt.n {
				t.Errorf("recorded %d latencies, want %d", lat.Count(), 2*tt.n)
			}
			if p50 := lat.Percentile(50); p50 <= 0 || p50 > 10*time.Second {
				t.Errorf("p50 = %v", p50)
			}
		})
	}
}

func TestRawPipelineRejectsBadConfig(t *testing.T) {
	p, err := DialRawPipeline(startRaw(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, c := range [][2]int{{64, 0}, {-1, 32}, {MaxRawFrame + 1, 32}} {
		if err := p.Run(10, c[0], c[1], nil); err == nil {
			t.Errorf("Run(size %d, window %d) succeeded", c[0], c[1])
		}
	}
}

// TestRawPipelineDetectsReordering feeds the pipeline's reader from a server
// that answers with the wrong sequence numbers.
func TestRawPipelineDetectsReordering(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var b [1 + 12]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return
		}
		binary.LittleEndian.PutUint64(b[5:], 7) // not sequence 0
		c.Write(b[1:])
		io.Copy(io.Discard, c)
	}()
	p, err := DialRawPipeline(l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Run(1, 8, 1, nil); err == nil {
		t.Fatal("Run accepted an answer with the wrong sequence number")
	}
}

func TestRawFetch(t *testing.T) {
	f, err := DialRawFetch(startRaw(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, n := range []int{0, 1, 4 << 10, 1 << 20, 100} {
		dst := make([]byte, n)
		if err := f.Fetch(dst); err != nil {
			t.Fatalf("fetch of %d bytes: %v", n, err)
		}
		want := make([]byte, n)
		FillPattern(want)
		if !bytes.Equal(dst, want) {
			t.Fatalf("fetch of %d bytes returned other bytes", n)
		}
	}
}

func TestRawServerRefuses(t *testing.T) {
	addr := startRaw(t)
	tests := []struct {
		name string
		send []byte
	}{
		{"unknown mode", []byte{'X'}},
		{"fetch too large", append([]byte{RawModeFetch}, binary.LittleEndian.AppendUint64(nil, MaxRawFetch+1)...)},
		{"frame too large", append([]byte{RawModeEcho}, binary.LittleEndian.AppendUint32(nil, MaxRawFrame+1)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tt.send); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			var b [1]byte
			if _, err := c.Read(b[:]); !errors.Is(err, io.EOF) {
				t.Fatalf("read after refused request = %v, want EOF (server closed)", err)
			}
		})
	}
}

func TestRawServerCloseEndsConnections(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewRawServer()
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	e, err := DialRawEcho(l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Echo([]byte("x"), make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after Close")
	}
	if err := e.Echo([]byte("x"), make([]byte, 1)); err == nil {
		t.Fatal("echo succeeded after Close")
	}
}

func TestRawMux(t *testing.T) {
	m, err := DialRawMux(startRaw(t), 8)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	done := make(chan error, m.Slots())
	for slot := range m.Slots() {
		go func() {
			req := echoPayload(64)
			for range 200 {
				if err := m.Echo(slot, req); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range m.Slots() {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("raw mux calls did not finish")
		}
	}
	for _, bad := range []struct {
		slot int
		req  []byte
	}{{-1, make([]byte, 8)}, {8, make([]byte, 8)}, {0, make([]byte, 3)}} {
		if err := m.Echo(bad.slot, bad.req); err == nil {
			t.Errorf("Echo(slot %d, %d bytes) succeeded", bad.slot, len(bad.req))
		}
	}
	m.Close()
	if err := m.Echo(0, make([]byte, 8)); !errors.Is(err, ErrRawMuxClosed) {
		t.Errorf("Echo after Close = %v, want ErrRawMuxClosed", err)
	}
	if _, err := DialRawMux("127.0.0.1:1", 0); err == nil {
		t.Error("DialRawMux with no slots succeeded")
	}
}
