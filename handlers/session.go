package handlers

import "github.com/starwire/starwire/handlers/ops"

// A session is a master's session on this worker (CreateWorkerSession).
//
// Sessions share the worker's variables and resources unless created with
// isolate_session_state, as TensorFlow's do: between-graph replicas each
// open a session of their own on a ps task and must all see its
// variables. An isolated session gets an Env of its own, the worker's but
// with variables of its own, which its graphs are built against; deleting
// the session drops them. CleanupAll, like TensorFlow's, clears the
// containers of the shared variables only.
type session struct {
	env      *ops.Env
	isolated bool
}

// newSession returns a session sharing the worker's state, or, with
// isolate, one with variables of its own.
func (w *Worker) newSession(isolate bool) *session {
	if !isolate {
		return &session{env: w.env}
	}
	env := *w.env
	env.Vars = ops.NewVariables()
	return &session{env: &env, isolated: true}
}

// close drops what an isolated session created. Steps still running keep
// the variables they hold (see ops.Variables.Cleanup).
func (s *session) close() {
	if s.isolated {
		s.env.Vars.Cleanup(nil)
	}
}
