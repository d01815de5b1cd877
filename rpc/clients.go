package rpc

import "sync"

// Clients caches one Client per peer address, so that every caller in a
// process shares one connection to each peer. Safe for concurrent use.
type Clients struct {
	// Options configure every client made (Options.Transport must be
	// set, as for NewClient); Name is set per address when Names has an
	// entry for it.
	Options ClientOptions
	// Names maps addresses to the task names used in errors.
	Names map[string]string

	mu      sync.Mutex
	clients map[string]*Client
}

// Get returns the client for addr, making it on first use.
func (cs *Clients) Get(addr string) *Client {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.clients[addr]; ok {
		return c
	}
	if cs.clients == nil {
		cs.clients = make(map[string]*Client)
	}
	opts := cs.Options
	if name, ok := cs.Names[addr]; ok {
		opts.Name = name
	}
	c := NewClient(addr, opts)
	cs.clients[addr] = c
	return c
}

// Close closes every client.
func (cs *Clients) Close() error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for addr, c := range cs.clients {
		c.Close()
		delete(cs.clients, addr)
	}
	return nil
}
