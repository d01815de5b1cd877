package handlers

import (
	"context"
	"strconv"

	"github.com/starwire/starwire/handlers/graph"
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// The transport-neutral WorkerService methods. The starwire and gRPC
// front ends decode requests, call these and encode the answers.

func (w *Worker) getStatus() *tfpb.GetStatusResponse {
	return &tfpb.GetStatusResponse{DeviceAttributes: []*tfpb.DeviceAttributes{w.attrs}}
}

func (w *Worker) createWorkerSession(req *tfpb.CreateWorkerSessionRequest) (*tfpb.CreateWorkerSessionResponse, error) {
	if req.GetSessionHandle() == "" {
		return nil, status.Errorf(wire.InvalidArgument, "CreateWorkerSession: empty session handle")
	}
	if c := req.GetServerDef().GetCluster(); c != nil && w.opts.Cluster != nil {
		if err := w.opts.Cluster(c); err != nil {
			return nil, status.Errorf(wire.FailedPrecondition, "CreateWorkerSession on %s: cluster: %v", w.task, err)
		}
	}
	w.mu.Lock()
	// A session created again keeps its state: a master retrying the
	// call must not lose an isolated session's variables.
	if w.sessions[req.GetSessionHandle()] == nil {
		w.sessions[req.GetSessionHandle()] = w.newSession(req.GetIsolateSessionState())
	}
	w.mu.Unlock()
	return &tfpb.CreateWorkerSessionResponse{}, nil
}

func (w *Worker) deleteWorkerSession(req *tfpb.DeleteWorkerSessionRequest) (*tfpb.DeleteWorkerSessionResponse, error) {
	w.mu.Lock()
	s := w.sessions[req.GetSessionHandle()]
	delete(w.sessions, req.GetSessionHandle())
	for h, g := range w.graphs {
		if g.session == req.GetSessionHandle() {
			delete(w.graphs, h)
		}
	}
	w.mu.Unlock()
	if s != nil {
		s.close()
	}
	return &tfpb.DeleteWorkerSessionResponse{}, nil
}

// checkSession refuses a request naming a session this worker does not
// know, with Aborted, as TensorFlow does, so a master recreates it.
func (w *Worker) checkSession(handle string, called bool) error {
	if !called {
		return nil
	}
	w.mu.Lock()
	ok := w.sessions[handle] != nil
	w.mu.Unlock()
	if !ok {
		return status.Errorf(wire.Aborted, "session %q is not found on %s (the task may have restarted)", handle, w.task)
	}
	return nil
}

func (w *Worker) registerGraph(req *tfpb.RegisterGraphRequest) (*tfpb.RegisterGraphResponse, error) {
	if err := w.checkSession(req.GetSessionHandle(), req.GetCreateWorkerSessionCalled()); err != nil {
		return nil, err
	}
	// A graph of a known session runs against its state; one of no
	// session (a master that did not call CreateWorkerSession) against the
	// worker's.
	env := w.env
	w.mu.Lock()
	sess := w.sessions[req.GetSessionHandle()]
	w.mu.Unlock()
	if sess != nil {
		env = sess.env
	}
	g, err := graph.Build(req.GetGraphDef(), env)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	if sess != nil && w.sessions[req.GetSessionHandle()] != sess {
		// Deleted while the graph was built: its state is gone.
		w.mu.Unlock()
		return nil, status.Errorf(wire.Aborted, "session %q is not found on %s (deleted while RegisterGraph ran)", req.GetSessionHandle(), w.task)
	}
	w.nextID++
	handle := "g" + strconv.FormatUint(w.nextID, 10)
	w.graphs[handle] = &registered{Graph: g, session: req.GetSessionHandle()}
	w.mu.Unlock()
	return &tfpb.RegisterGraphResponse{GraphHandle: handle}, nil
}

func (w *Worker) deregisterGraph(req *tfpb.DeregisterGraphRequest) (*tfpb.DeregisterGraphResponse, error) {
	w.mu.Lock()
	_, ok := w.graphs[req.GetGraphHandle()]
	delete(w.graphs, req.GetGraphHandle())
	w.mu.Unlock()
	if !ok {
		return nil, status.Errorf(wire.InvalidArgument, "DeregisterGraph: graph handle %q is not registered", req.GetGraphHandle())
	}
	return &tfpb.DeregisterGraphResponse{}, nil
}

func (w *Worker) lookupGraph(handle string) (*registered, error) {
	w.mu.Lock()
	g := w.graphs[handle]
	w.mu.Unlock()
	if g == nil {
		return nil, status.Errorf(wire.Aborted, "RunGraph: graph handle %q is not registered on %s", handle, w.task)
	}
	return g, nil
}

func (w *Worker) cleanupGraph(req *tfpb.CleanupGraphRequest) *tfpb.CleanupGraphResponse {
	w.rendezvous.Cleanup(req.GetStepId(), errStepCleaned)
	return &tfpb.CleanupGraphResponse{}
}

func (w *Worker) cleanupAll(req *tfpb.CleanupAllRequest) *tfpb.CleanupAllResponse {
	w.vars.Cleanup(req.GetContainer())
	w.rendezvous.CleanupAll(status.Errorf(wire.Aborted, "CleanupAll"))
	return &tfpb.CleanupAllResponse{}
}

// recvTensor checks key and waits for its tensor in step. The caller owns
// the returned tensor's Buf.
func (w *Worker) recvTensor(ctx context.Context, step int64, key string) (wire.Tensor, int64, error) {
	if err := w.checkKey(key); err != nil {
		return wire.Tensor{}, 0, err
	}
	return w.rendezvous.Recv(ctx, step, key)
}

// checkKey refuses keys whose source is not this worker's device in this
// incarnation, with Aborted for an old incarnation, so a master learns that
// the task restarted. Keys in TensorFlow's form (16 hex digits) are checked
// in place, without allocating, on the steady-state RecvTensor path; others
// are parsed in full.
func (w *Worker) checkKey(key string) error {
	dev := w.attrs.Name
	if len(key) > len(dev)+17 && key[:len(dev)] == dev && key[len(dev)] == ';' && key[len(dev)+17] == ';' {
		if inc, ok := parseHex16(key[len(dev)+1 : len(dev)+17]); ok {
			return w.checkIncarnation(key, inc)
		}
	}
	p, err := rendezvous.ParseKey(key)
	if err != nil {
		return status.Errorf(wire.InvalidArgument, "RecvTensor: %v", err)
	}
	if p.Src != w.device {
		return status.Errorf(wire.InvalidArgument, "RecvTensor: key %q is not sent from %s", key, dev)
	}
	return w.checkIncarnation(key, p.SrcIncarnation)
}

func (w *Worker) checkIncarnation(key string, inc uint64) error {
	if inc != w.opts.Incarnation {
		return status.Errorf(wire.Aborted, "RecvTensor: key %q expects incarnation %016x of %s, which is %016x (the task restarted)", key, inc, w.attrs.Name, w.opts.Incarnation)
	}
	return nil
}

// parseHex16 parses 16 hex digits.
func parseHex16(s string) (uint64, bool) {
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(d)
	}
	return v, len(s) == 16
}
