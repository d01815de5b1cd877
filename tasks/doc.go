// Package tasks runs the tasks of a parameter-server cluster, as
// tf.distribute.Server does for TensorFlow: a Server is one task, a
// handlers.Worker serving TensorFlow's WorkerService over starwire (under
// grpc+seastar, on TCP, the packet protocol on kernel UDP, or AF_XDP) and
// over gRPC, the gRPC port kept for the master side and for health probes
// as TensorFlow keeps it. A task reaches its peers through Peers, which
// resolves them from the Layout every process agrees on (the cluster spec,
// the endpoint map, the protocol, TLS) and follows tasks that restart
// elsewhere; a driver takes its Callers from a Peers too.
//
// The life of a task: Listen (or ListenAt) binds its ports, ServeAFXDP
// optionally adds an AF_XDP endpoint, Start serves, Drain marks it
// NOT_SERVING, Close stops it. Metrics, TLS (Layout.TLS), the packet
// path's tickets (PacketAuth) and a pcap Capture are set on the Server
// before Start.
//
// StartLocal runs a whole cluster in one process, each task on loopback
// ports with peers of its own as separate processes would have: the
// cluster tests and the train command's local cluster run on it. Await
// waits until a cluster's tasks answer.
package tasks
