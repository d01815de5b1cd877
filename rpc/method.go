package rpc

import "hash/fnv"

// A Method names a remote procedure. Its ID, which is what travels on the
// wire, is derived from the name, so both ends agree without a registry.
type Method struct {
	Name string
	ID   uint32
}

// NewMethod returns the Method called name.
func NewMethod(name string) Method { return Method{Name: name, ID: MethodID(name)} }

// MethodID is the 32-bit FNV-1a hash of name. A Server refuses to register
// two names with the same ID.
func MethodID(name string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return h.Sum32()
}

func (m Method) String() string { return m.Name }
