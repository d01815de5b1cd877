package afxdp_test

import "github.com/starwire/starwire/internal/afxdptest"

// The fault injection the link tests share, under the names they use.
type (
	Impairment   = afxdptest.Impairment
	ImpairedLink = afxdptest.ImpairedLink
)

var Impair = afxdptest.Impair
