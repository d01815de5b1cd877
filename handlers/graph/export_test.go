package graph

// GoAsync and IdleRunners expose the runners of asynchronous nodes to the
// tests of package graph_test.
var GoAsync = goAsync

func IdleRunners() int { return runners.Parked() }
