// Command starwire runs a local parameter-server cluster over starwire.
package main

func main() {}
