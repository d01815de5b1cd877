// Package compute bounds how many goroutines of a process run CPU-bound
// work at once: op kernels, drawing input batches. A goroutine holds one of
// a Limit's tokens while it computes and gives it back before it waits for
// anything else, above all the network: a goroutine that holds a token
// while it waits for a tensor another goroutine must compute first can
// deadlock the process once every token is so held.
//
// Why bound them: Go looks at the network only when a processor (P) runs
// out of goroutines, and preempts a running goroutine only after 10 ms
// (golang/go#51651). When as many goroutines compute as there are Ps, an
// answer a step waits for sits in the kernel until one of them ends its
// run. A process that runs several tasks (starwire train's local cluster)
// takes one P more than its CPUs and bounds its computing goroutines to
// one per CPU, so that one P is always free to read the network.
package compute
