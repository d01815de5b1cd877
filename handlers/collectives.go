package handlers

import (
	"context"
	"sort"
	"sync"

	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// collectives is the worker's share of collective-op bookkeeping: group
// membership (CompleteGroup), instance parameters (CompleteInstance) and
// step sequences (GetStepSequence). The data movement of collectives
// (RecvBuf) is not implemented.
type collectives struct {
	mu        sync.Mutex
	groups    map[int32]*group
	instances map[[2]int32]*instance
	steps     map[int64]int64 // next step id by graph key
}

// A group fills as members call CompleteGroup; done closes when it is full.
type group struct {
	size       int32
	deviceType string
	members    map[string]*tfpb.DeviceAttributes
	done       chan struct{}
}

// An instance fills as members call CompleteInstance; done closes when
// every member of its group has.
type instance struct {
	seen   map[string]bool
	source string
	done   chan struct{}
}

func newCollectives() *collectives {
	return &collectives{
		groups:    make(map[int32]*group),
		instances: make(map[[2]int32]*instance),
		steps:     make(map[int64]int64),
	}
}

// completeGroup adds the caller's device to the group and waits until the
// group has all its members, then answers with them, sorted by name.
func (w *Worker) completeGroup(ctx context.Context, req *tfpb.CompleteGroupRequest) (*tfpb.CompleteGroupResponse, error) {
	c := w.collective
	dev := req.GetDeviceAttributes()
	if req.GetGroupSize() <= 0 || dev.GetName() == "" {
		return nil, status.Errorf(wire.InvalidArgument, "CompleteGroup: group %d: size %d, device %q", req.GetGroupKey(), req.GetGroupSize(), dev.GetName())
	}
	c.mu.Lock()
	g := c.groups[req.GetGroupKey()]
	if g == nil {
		g = &group{size: req.GetGroupSize(), deviceType: req.GetDeviceType(), members: make(map[string]*tfpb.DeviceAttributes), done: make(chan struct{})}
		c.groups[req.GetGroupKey()] = g
	}
	if g.size != req.GetGroupSize() || g.deviceType != req.GetDeviceType() {
		c.mu.Unlock()
		return nil, status.Errorf(wire.InvalidArgument, "CompleteGroup: group %d is %d×%s, request says %d×%s", req.GetGroupKey(), g.size, g.deviceType, req.GetGroupSize(), req.GetDeviceType())
	}
	if _, ok := g.members[dev.GetName()]; !ok {
		if int32(len(g.members)) == g.size {
			c.mu.Unlock()
			return nil, status.Errorf(wire.Internal, "CompleteGroup: group %d is full without %s", req.GetGroupKey(), dev.GetName())
		}
		g.members[dev.GetName()] = dev
		if int32(len(g.members)) == g.size {
			close(g.done)
		}
	}
	c.mu.Unlock()
	select {
	case <-g.done:
	case <-ctx.Done():
		return nil, status.Errorf(status.CodeOf(ctx.Err()), "CompleteGroup: group %d waiting for members: %v", req.GetGroupKey(), ctx.Err())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &tfpb.CompleteGroupResponse{GroupKey: req.GetGroupKey(), GroupSize: g.size, DeviceType: g.deviceType}
	tasks := make(map[string]bool)
	for _, d := range g.members {
		resp.DeviceAttributes = append(resp.DeviceAttributes, d)
		if dn, err := rendezvous.ParseDevice(d.GetName()); err == nil {
			tasks[dn.TaskName()] = true
		} else {
			tasks[d.GetName()] = true
		}
	}
	sort.Slice(resp.DeviceAttributes, func(i, j int) bool { return resp.DeviceAttributes[i].GetName() < resp.DeviceAttributes[j].GetName() })
	resp.NumTasks = int32(len(tasks))
	return resp, nil
}

// completeInstance records the caller's device for an instance of a
// complete group, waits until every member has reported, and answers with
// the rank of the source (the member with is_source), or -1 when there is
// none.
func (w *Worker) completeInstance(ctx context.Context, req *tfpb.CompleteInstanceRequest) (*tfpb.CompleteInstanceResponse, error) {
	c := w.collective
	c.mu.Lock()
	g := c.groups[req.GetGroupKey()]
	if g == nil || int32(len(g.members)) != g.size {
		c.mu.Unlock()
		return nil, status.Errorf(wire.FailedPrecondition, "CompleteInstance: group %d is not complete", req.GetGroupKey())
	}
	if _, ok := g.members[req.GetDevice()]; !ok {
		c.mu.Unlock()
		return nil, status.Errorf(wire.InvalidArgument, "CompleteInstance: %q is not in group %d", req.GetDevice(), req.GetGroupKey())
	}
	key := [2]int32{req.GetGroupKey(), req.GetInstanceKey()}
	in := c.instances[key]
	if in == nil {
		in = &instance{seen: make(map[string]bool), done: make(chan struct{})}
		c.instances[key] = in
	}
	if !in.seen[req.GetDevice()] {
		in.seen[req.GetDevice()] = true
		if req.GetIsSource() {
			in.source = req.GetDevice()
		}
		if int32(len(in.seen)) == g.size {
			close(in.done)
		}
	}
	c.mu.Unlock()
	select {
	case <-in.done:
	case <-ctx.Done():
		return nil, status.Errorf(status.CodeOf(ctx.Err()), "CompleteInstance: instance %d waiting for members: %v", req.GetInstanceKey(), ctx.Err())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, 0, len(g.members))
	for name := range g.members {
		names = append(names, name)
	}
	sort.Strings(names)
	rank := int32(-1)
	for i, name := range names {
		if name == in.source {
			rank = int32(i)
		}
	}
	return &tfpb.CompleteInstanceResponse{InstanceKey: req.GetInstanceKey(), SourceRank: rank}, nil
}

// getStepSequence returns, for each graph key, the next step id of its
// sequence, and advances the sequence.
func (w *Worker) getStepSequence(req *tfpb.GetStepSequenceRequest) *tfpb.GetStepSequenceResponse {
	c := w.collective
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &tfpb.GetStepSequenceResponse{}
	for _, k := range req.GetGraphKey() {
		resp.StepSequence = append(resp.StepSequence, &tfpb.StepSequence{GraphKey: k, NextStepId: c.steps[k]})
		c.steps[k]++
	}
	return resp
}

// recvBuf is not implemented: no collective op runs here, so there is no
// buffer to send (see the package doc).
func (w *Worker) recvBuf(req *tfpb.RecvBufRequest) (*tfpb.RecvBufResponse, error) {
	return nil, status.Errorf(wire.Unimplemented, "RecvBuf: collective buffer transfers are not supported: no collective op runs on this worker (key %q)", req.GetBufRendezvousKey())
}

// markRecvFinished acknowledges a finished RecvTensor. The worker keeps no
// per-request state for RecvTensor (a retried request is served again from
// the rendezvous or fails), so there is nothing to release.
func (w *Worker) markRecvFinished(*tfpb.MarkRecvFinishedRequest) *tfpb.MarkRecvFinishedResponse {
	return &tfpb.MarkRecvFinishedResponse{}
}
