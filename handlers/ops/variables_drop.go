package ops

import "github.com/starwire/starwire/wire"

// Drop drops one variable, as Cleanup drops a container's: TensorFlow's
// eager runtime deletes an anonymous variable with its last handle. A
// step still holding it finds it uninitialized. An unknown variable is
// ignored.
func (vs *Variables) Drop(container, name string) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	k := varKey{container, name}
	v := vs.m[k]
	if v == nil {
		return
	}
	delete(vs.m, k)
	v.mu.Lock()
	v.t.Buf.Release()
	v.t, v.init = wire.Tensor{}, false
	v.mu.Unlock()
}

// Len returns the number of variables.
func (vs *Variables) Len() int {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	return len(vs.m)
}
