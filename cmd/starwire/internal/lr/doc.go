// Package lr trains a sparse logistic-regression model with an embedding
// table on a parameter-server cluster, through a driver: the table lives on
// the parameter servers as a resource variable, each worker pulls the rows
// of its batch with RecvTensor from the servers' ResourceGather, computes
// the forward and backward pass in its own partition graph, and the driver
// pushes the sparse gradient back with a RunGraph that applies Adagrad on
// the servers.
package lr
