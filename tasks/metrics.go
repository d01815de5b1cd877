package tasks

import (
	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/metrics"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
)

// export has the task's calls, both those it serves and those it makes to
// its peers, and its packet endpoints counted in s.Metrics.
func (s *Server) export(layout *Layout) {
	m := s.Metrics
	layout.Interceptors = append(layout.Interceptors[:len(layout.Interceptors):len(layout.Interceptors)], m.ClientInterceptor())
	if layout.TLS != nil {
		m.AddTLS(layout.TLS)
	}
	if ep, ok := s.starC.(metrics.EndpointStats); ok {
		m.AddEndpoint(s.Task()+"@"+s.StarAddr, netpath.UDP, ep)
	}
	for _, c := range s.xdpEPs {
		ep, ok := c.(*afxdp.Endpoint)
		if !ok {
			continue
		}
		// A task may have several (a ps of a local fabric has one per
		// worker): the address tells them apart.
		name := s.Task() + "@" + ep.Addr().String()
		m.AddEndpoint(name, netpath.AFXDP, ep)
		if xl, ok := ep.Link().(*link.XSKLink); ok && xl.Program() != nil {
			m.AddXDP(name, xl.Program())
		}
	}
}

// serverInterceptors are the interceptors of the task's starwire server.
func (s *Server) serverInterceptors() []rpc.ServerInterceptor {
	if s.Metrics == nil {
		return nil
	}
	return []rpc.ServerInterceptor{s.Metrics.ServerInterceptor()}
}
