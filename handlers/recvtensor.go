package handlers

import (
	"context"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// RecvTensorRequest and RecvTensorResponse field numbers, for the
// hand-written codec of the steady-state path.
const (
	fieldRecvStepID    = 1
	fieldRecvKey       = 2
	fieldRecvRequestID = 7
	fieldRespTensor    = 1
	fieldRespIsDead    = 2
	fieldRespSendStart = 3
	fieldTensorDType   = 1
	fieldTensorShape   = 2
	fieldShapeDim      = 2
	fieldDimSize       = 1
)

// recvTensorRequest is the part of a RecvTensorRequest the worker uses.
// key points into the frame's metadata.
type recvTensorRequest struct {
	step      int64
	key       []byte
	requestID int64
}

// parseRecvTensorRequest decodes b without allocating; unknown fields are
// skipped, as protobuf requires.
func parseRecvTensorRequest(b []byte) (recvTensorRequest, error) {
	var r recvTensorRequest
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return r, status.Errorf(wire.InvalidArgument, "decode RecvTensorRequest: %v", protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == fieldRecvStepID && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return r, status.Errorf(wire.InvalidArgument, "decode RecvTensorRequest step_id: %v", protowire.ParseError(n))
			}
			r.step, b = int64(v), b[n:]
		case num == fieldRecvRequestID && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return r, status.Errorf(wire.InvalidArgument, "decode RecvTensorRequest request_id: %v", protowire.ParseError(n))
			}
			r.requestID, b = int64(v), b[n:]
		case num == fieldRecvKey && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return r, status.Errorf(wire.InvalidArgument, "decode RecvTensorRequest rendezvous_key: %v", protowire.ParseError(n))
			}
			r.key, b = v, b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return r, status.Errorf(wire.InvalidArgument, "decode RecvTensorRequest field %d: %v", num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	return r, nil
}

// recvTensorResponse is the part of a RecvTensorResponse the pulling worker
// uses; the tensor's dtype and shape come with its segment's descriptor.
type recvTensorResponse struct {
	isDead    bool
	sendStart int64
}

// parseRecvTensorResponse decodes b without allocating; the tensor and
// unknown fields are skipped, as protobuf requires of unknown ones.
func parseRecvTensorResponse(b []byte) (recvTensorResponse, error) {
	var r recvTensorResponse
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return r, status.Errorf(wire.DataLoss, "decode RecvTensorResponse: %v", protowire.ParseError(n))
		}
		b = b[n:]
		if (num == fieldRespIsDead || num == fieldRespSendStart) && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return r, status.Errorf(wire.DataLoss, "decode RecvTensorResponse field %d: %v", num, protowire.ParseError(n))
			}
			if num == fieldRespIsDead {
				r.isDead = v != 0
			} else {
				r.sendStart = int64(v)
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return r, status.Errorf(wire.DataLoss, "decode RecvTensorResponse field %d: %v", num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return r, nil
}

// appendFused appends msg to b as one entry of a FuseRecvTensor request
// or response: its length as a uvarint, then its bytes.
func appendFused(b, msg []byte) []byte { return protowire.AppendBytes(b, msg) }

// nextFused splits the first entry of a FuseRecvTensor request or response
// off b.
func nextFused(b []byte) (msg, rest []byte, err error) {
	m, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return nil, b, protowire.ParseError(n)
	}
	return m, b[n:], nil
}

// appendRecvTensorRequest encodes a RecvTensorRequest for step and key:
// every client's RecvTensor and FuseRecvTensor requests over starwire.
func appendRecvTensorRequest(dst []byte, step int64, key string) []byte {
	if step != 0 {
		dst = protowire.AppendTag(dst, fieldRecvStepID, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(step))
	}
	dst = protowire.AppendTag(dst, fieldRecvKey, protowire.BytesType)
	return protowire.AppendString(dst, key)
}

// appendRecvTensorResponse encodes a RecvTensorResponse for t without its
// content: dtype and shape in the TensorProto, is_dead and
// send_start_micros; the bytes travel as a raw segment.
func appendRecvTensorResponse(dst []byte, t *wire.Tensor, sendStart int64) []byte {
	shapeLen := 0
	for _, d := range t.Shape {
		shapeLen += protowire.SizeTag(fieldShapeDim) + protowire.SizeBytes(dimSize(d))
	}
	tensorLen := protowire.SizeTag(fieldTensorShape) + protowire.SizeBytes(shapeLen)
	if t.DType != 0 {
		tensorLen += protowire.SizeTag(fieldTensorDType) + protowire.SizeVarint(uint64(t.DType))
	}
	dst = protowire.AppendTag(dst, fieldRespTensor, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(tensorLen))
	if t.DType != 0 {
		dst = protowire.AppendTag(dst, fieldTensorDType, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(t.DType))
	}
	dst = protowire.AppendTag(dst, fieldTensorShape, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(shapeLen))
	for _, d := range t.Shape {
		dst = protowire.AppendTag(dst, fieldShapeDim, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(dimSize(d)))
		if d != 0 {
			dst = protowire.AppendTag(dst, fieldDimSize, protowire.VarintType)
			dst = protowire.AppendVarint(dst, uint64(d))
		}
	}
	if t.Dead {
		dst = protowire.AppendTag(dst, fieldRespIsDead, protowire.VarintType)
		dst = protowire.AppendVarint(dst, 1)
	}
	if sendStart != 0 {
		dst = protowire.AppendTag(dst, fieldRespSendStart, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(sendStart))
	}
	return dst
}

// dimSize is the encoded size of a TensorShapeProto.Dim holding d.
func dimSize(d int64) int {
	if d == 0 {
		return 0
	}
	return protowire.SizeTag(fieldDimSize) + protowire.SizeVarint(uint64(d))
}

// onWire makes t sendable as a raw segment: a dead tensor has no data, so
// it travels with shape [0].
func onWire(t wire.Tensor) wire.Tensor {
	if t.Dead {
		t.Buf.Release()
		return wire.Tensor{DType: t.DType, Shape: deadShape, Dead: true, Data: []byte{}}
	}
	return t
}

var deadShape = []int64{0}

// handleRecvTensor serves RecvTensor over starwire. With the tensor already
// in the rendezvous it allocates nothing: the request is decoded in place,
// the key is looked up through a string view of the metadata, and the
// tensor's buffer reference moves to the response, which the server
// releases once sent.
//
// It runs on the connection's receiving goroutine (the method is
// Deferrable): a tensor already there is answered at once; otherwise the
// answer is deferred to the Send that puts the tensor in the rendezvous,
// which answers on its own goroutine, as TensorFlow's RecvLocalAsync calls
// its done callback, instead of a goroutine waiting for it and being woken.
func (w *Worker) handleRecvTensor(ctx context.Context, in *wire.Inbound, resp *rpc.Response) error {
	req, err := parseRecvTensorRequest(in.Meta)
	if err != nil {
		return err
	}
	key := unsafe.String(unsafe.SliceData(req.key), len(req.key))
	if err := w.checkKey(key); err != nil {
		return err
	}
	if t, start, ok, err := w.rendezvous.TryRecv(req.step, key); ok || err != nil {
		if err != nil {
			return err
		}
		answerRecvTensor(resp, t, start)
		return nil
	}
	answer, ok := resp.Defer()
	if !ok {
		t, start, err := w.rendezvous.Recv(ctx, req.step, key)
		if err != nil {
			return err
		}
		answerRecvTensor(resp, t, start)
		return nil
	}
	deferRecvTensor(ctx, w.rendezvous, req.step, key, resp, answer)
	return rpc.ErrDeferred
}

// answerRecvTensor puts t in resp; resp takes t's reference.
func answerRecvTensor(resp *rpc.Response, t wire.Tensor, start int64) {
	t = onWire(t)
	resp.Meta = appendRecvTensorResponse(resp.Meta, &t, start)
	resp.Tensors = append(resp.Tensors, t)
}

// handleFuseRecvTensor serves FuseRecvTensor: the keys are received in
// order, each waiting up to the call's deadline.
func (w *Worker) handleFuseRecvTensor(ctx context.Context, in *wire.Inbound, resp *rpc.Response) error {
	b := in.Meta
	var scratch []byte
	for i := 0; len(b) > 0; i++ {
		m, rest, err := nextFused(b)
		if err != nil {
			return status.Errorf(wire.InvalidArgument, "FuseRecvTensor: request %d: %v", i, err)
		}
		b = rest
		req, err := parseRecvTensorRequest(m)
		if err != nil {
			return status.Errorf(wire.InvalidArgument, "FuseRecvTensor: request %d: %v", i, err)
		}
		// A view of the metadata: Recv copies the key if it has to wait.
		key := unsafe.String(unsafe.SliceData(req.key), len(req.key))
		t, start, err := w.recvTensor(ctx, req.step, key)
		if err != nil {
			return status.Errorf(status.CodeOf(err), "FuseRecvTensor: key %d: %v", i, err)
		}
		t = onWire(t)
		resp.Tensors = append(resp.Tensors, t)
		scratch = appendRecvTensorResponse(scratch[:0], &t, start)
		resp.Meta = appendFused(resp.Meta, scratch)
	}
	return nil
}
