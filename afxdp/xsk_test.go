package afxdp_test

import "github.com/starwire/starwire/internal/linktest"

// The tests' AF_XDP links, on the port linktest steers.
var openXSK = linktest.OpenXSK

const xskPort = linktest.XSKPort
