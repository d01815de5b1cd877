package wire

// A Withdrawal says what became of a message a transport was asked to take
// back before it had finished with it (rpc.Withdrawer; afxdp's sessions
// answer the same), so that a caller whose deadline passes may return at
// once instead of waiting for the peer to take the rest of its request.
type Withdrawal uint8

const (
	// Kept: the transport still reads the message's memory until it calls
	// its Done.
	Kept Withdrawal = iota
	// Completing: the transport is done with the message's memory and
	// calls its Done, or already has.
	Completing
	// Withdrawn: the message was taken back part way; the transport
	// finishes the frame (or packet stream) from a copy of its own and will
	// not call its Done.
	Withdrawn
	// Unsent: the message was taken back before any of it reached the
	// peer; its Done will not be called.
	Unsent
)
