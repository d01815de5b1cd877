package eager

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// Options configure a Service.
type Options struct {
	// Env is the task's kernel environment, shared with its graphs: the
	// variables eager ops make are the ones graphs see, and component
	// functions send and receive through its rendezvous.
	Env *ops.Env
	// Devices are the task's devices, as CreateContext answers them.
	Devices []*tfpb.DeviceAttributes
	// Cluster, when set, is told the cluster of every context's server_def,
	// so that the task reaches peers that moved.
	Cluster func(*tfpb.ClusterDef) error
	// Logger receives one line per context created, closed or collected.
	Logger *slog.Logger
	// Now is the clock keep-alive is measured by; nil means time.Now.
	Now func() time.Time
}

// A Service is one task's eager service: its contexts, each with the
// tensors and functions its client made. Safe for concurrent use.
type Service struct {
	opts Options
	task string

	mu       sync.Mutex
	contexts map[uint64]*serverContext
	nextVar  uint64 // numbers the anonymous variables of every context
}

// New returns the eager service of the task whose kernels run in
// opts.Env.
func New(opts Options) (*Service, error) {
	if opts.Env == nil {
		return nil, fmt.Errorf("eager: new service: no Env")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Service{opts: opts, task: opts.Env.Task, contexts: make(map[uint64]*serverContext)}, nil
}

// errUnknownContext is TensorFlow's answer to a request naming a context
// the task does not hold: Aborted, so that a client whose task restarted
// creates its contexts again.
func errUnknownContext(id uint64) error {
	return status.Errorf(wire.Aborted, "Unable to find a context_id matching the specified one (%d). Perhaps the worker was restarted, or the context was GC'd?", id)
}

// context returns the context id names, recording the access that keeps it
// alive.
func (s *Service) context(id uint64) (*serverContext, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.contexts[id]
	if c == nil {
		return nil, errUnknownContext(id)
	}
	c.lastUse = s.opts.Now()
	return c, nil
}

// CreateContext creates the context the request names. A context of that
// id with an older view id is replaced (its client reconnected after
// cluster updates); one with a newer view id is refused.
func (s *Service) CreateContext(ctx context.Context, req *tfpb.CreateContextRequest) (*tfpb.CreateContextResponse, error) {
	id := req.GetContextId()
	if def := req.GetServerDef().GetCluster(); def != nil && s.opts.Cluster != nil {
		if err := s.opts.Cluster(def); err != nil {
			return nil, status.Errorf(wire.FailedPrecondition, "EagerService:CreateContext on %s: cluster: %v", s.task, err)
		}
	}
	if req.GetClearExistingContexts() {
		s.closeAll()
	}
	s.mu.Lock()
	if old := s.contexts[id]; old != nil {
		if req.GetContextViewId() < old.view {
			s.mu.Unlock()
			return nil, status.Errorf(wire.InvalidArgument, "EagerService:CreateContext failed. Context id: <%d> already exists.", id)
		}
		delete(s.contexts, id)
		defer old.close(s.opts.Env)
	}
	c := newServerContext(id, req.GetContextViewId(), time.Duration(req.GetKeepAliveSecs())*time.Second, s.opts.Now())
	s.contexts[id] = c
	s.mu.Unlock()
	s.opts.Logger.Info("eager context created", "task", s.task, "context_id", id, "view", req.GetContextViewId(), "keep_alive_secs", req.GetKeepAliveSecs())
	return &tfpb.CreateContextResponse{DeviceAttributes: s.opts.Devices}, nil
}

// UpdateContext moves a context to the next view id; the cluster it
// carries, when any, is followed as CreateContext's is.
func (s *Service) UpdateContext(ctx context.Context, req *tfpb.UpdateContextRequest) (*tfpb.UpdateContextResponse, error) {
	c, err := s.context(req.GetContextId())
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.GetContextViewId() != c.view+1 {
		return nil, status.Errorf(wire.InvalidArgument, "EagerService:UpdateContext failed. Context id: <%d> currently at view #%d but received update request at view #%d. View id should only be continuously incremented.", c.id, c.view, req.GetContextViewId())
	}
	c.view++
	if len(req.GetClusterDeviceAttributes()) == 0 {
		// The client says the update does not concern this task.
		return &tfpb.UpdateContextResponse{}, nil
	}
	if def := req.GetServerDef().GetCluster(); def != nil && s.opts.Cluster != nil {
		if err := s.opts.Cluster(def); err != nil {
			return nil, status.Errorf(wire.FailedPrecondition, "EagerService:UpdateContext on %s: cluster: %v", s.task, err)
		}
	}
	return &tfpb.UpdateContextResponse{DeviceAttributes: s.opts.Devices}, nil
}

// KeepAlive answers the context's view id, so that a client can tell a
// restarted task (Aborted) from a live one.
func (s *Service) KeepAlive(ctx context.Context, req *tfpb.KeepAliveRequest) (*tfpb.KeepAliveResponse, error) {
	c, err := s.context(req.GetContextId())
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return &tfpb.KeepAliveResponse{ContextViewId: c.view}, nil
}

// CloseContext drops a context and what it made. An unknown context and a
// stale view id are ignored, as TensorFlow ignores them.
func (s *Service) CloseContext(ctx context.Context, req *tfpb.CloseContextRequest) (*tfpb.CloseContextResponse, error) {
	s.mu.Lock()
	c := s.contexts[req.GetContextId()]
	if c == nil {
		s.mu.Unlock()
		return &tfpb.CloseContextResponse{}, nil
	}
	c.mu.Lock()
	stale := req.GetContextViewId() < c.view
	c.mu.Unlock()
	if stale {
		s.mu.Unlock()
		s.opts.Logger.Info("eager context close with a stale view id ignored", "task", s.task, "context_id", c.id, "view", req.GetContextViewId())
		return &tfpb.CloseContextResponse{}, nil
	}
	delete(s.contexts, c.id)
	s.mu.Unlock()
	c.close(s.opts.Env)
	s.opts.Logger.Info("eager context closed", "task", s.task, "context_id", c.id)
	return &tfpb.CloseContextResponse{}, nil
}

// WaitQueueDone answers once every enqueued operation has run: operations
// run synchronously, within their Enqueue, so that is at once. Waiting on
// particular ops is refused as TensorFlow refuses it.
func (s *Service) WaitQueueDone(ctx context.Context, req *tfpb.WaitQueueDoneRequest) (*tfpb.WaitQueueDoneResponse, error) {
	if _, err := s.context(req.GetContextId()); err != nil {
		return nil, err
	}
	if len(req.GetOpId()) > 0 {
		return nil, status.Errorf(wire.Unimplemented, "EagerServiceImpl::WaitQueueDone is not implemented for particular op IDs.")
	}
	return &tfpb.WaitQueueDoneResponse{}, nil
}

// Collect drops the contexts whose keep-alive lapsed: those with a
// keep_alive_secs not heard from for longer than it. It returns how many
// it dropped.
func (s *Service) Collect() int {
	now := s.opts.Now()
	var lapsed []*serverContext
	s.mu.Lock()
	for id, c := range s.contexts {
		if c.keepAlive > 0 && now.Sub(c.lastUse) > c.keepAlive {
			delete(s.contexts, id)
			lapsed = append(lapsed, c)
		}
	}
	s.mu.Unlock()
	for _, c := range lapsed {
		s.opts.Logger.Warn("eager context collected: its keep-alive lapsed", "task", s.task, "context_id", c.id, "keep_alive", c.keepAlive)
		c.close(s.opts.Env)
	}
	return len(lapsed)
}

// CollectEvery runs Collect every interval until ctx ends.
func (s *Service) CollectEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Collect()
		}
	}
}

// Close drops every context.
func (s *Service) Close() { s.closeAll() }

func (s *Service) closeAll() {
	s.mu.Lock()
	all := s.contexts
	s.contexts = make(map[uint64]*serverContext)
	s.mu.Unlock()
	for _, c := range all {
		c.close(s.opts.Env)
	}
}

// Contexts returns the number of contexts the task holds.
func (s *Service) Contexts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.contexts)
}

// varName returns a fresh name for an anonymous variable.
func (s *Service) varName() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextVar++
	return s.nextVar
}
