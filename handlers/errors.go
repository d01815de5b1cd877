package handlers

import "errors"

var errBadTensor = errors.New("bad tensor")
