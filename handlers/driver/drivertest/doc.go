// Package drivertest has fake tasks for the tests of what drives a
// cluster through a driver.Driver (a training session, a job): Callers
// of tasks that run no graphs, which a test kills or restarts between
// calls. Only tests import it.
package drivertest
