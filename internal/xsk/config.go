package xsk

import (
	"fmt"
	"math/bits"
)

// BindMode chooses how the kernel moves packets between the NIC and UMEM.
type BindMode int

const (
	// ModeAuto lets the kernel use zero-copy when the driver supports it
	// and copy mode otherwise.
	ModeAuto BindMode = iota
	// ModeCopy forces copy mode (XDP_COPY), the only mode veth offers.
	ModeCopy
	// ModeZeroCopy requires zero-copy (XDP_ZEROCOPY); Open fails without it.
	ModeZeroCopy
)

// String names the mode.
func (m BindMode) String() string {
	switch m {
	case ModeCopy:
		return "copy"
	case ModeZeroCopy:
		return "zero-copy"
	default:
		return "auto"
	}
}

// Defaults used for zero Config fields.
const (
	DefaultFrameSize = 2048
	DefaultNumFrames = 4096
)

// Config sizes a socket. The zero Config gives 4096 chunks of 2 KiB, a fill
// ring of half the chunks (the other half stays free for transmission), and
// RX/TX/completion rings of the same size as the fill ring.
type Config struct {
	// FrameSize is the UMEM chunk size: a power of two from 2048 to the
	// page size. It bounds the largest frame: in copy mode the kernel puts
	// packets 256 bytes (XDP_PACKET_HEADROOM) into the chunk, so 2048
	// carries frames up to 1792 bytes, enough for a 1500-byte MTU; larger
	// frames are dropped and counted in Stats.
	FrameSize int
	// NumFrames is the number of chunks in the UMEM.
	NumFrames int
	// FillSize, CompletionSize, RxSize and TxSize are ring sizes, powers of
	// two.
	FillSize, CompletionSize, RxSize, TxSize int
	// Mode selects copy or zero-copy binding.
	Mode BindMode
	// NoNeedWakeup binds without XDP_USE_NEED_WAKEUP even when the kernel
	// supports it, so every TX is kicked and RX never needs one.
	NoNeedWakeup bool
}

func (c Config) withDefaults() (Config, error) {
	if c.FrameSize == 0 {
		c.FrameSize = DefaultFrameSize
	}
	if c.NumFrames == 0 {
		c.NumFrames = DefaultNumFrames
	}
	if c.FrameSize < 2048 || bits.OnesCount(uint(c.FrameSize)) != 1 {
		return c, fmt.Errorf("xsk: frame size %d: %w", c.FrameSize, ErrConfig)
	}
	if c.NumFrames < 2 {
		return c, fmt.Errorf("xsk: %d frames: %w", c.NumFrames, ErrConfig)
	}
	half := 1 << (bits.Len(uint(c.NumFrames/2)) - 1) // largest power of two <= NumFrames/2
	for _, p := range []*int{&c.FillSize, &c.CompletionSize, &c.RxSize, &c.TxSize} {
		if *p == 0 {
			*p = half
		}
		if *p <= 0 || bits.OnesCount(uint(*p)) != 1 {
			return c, fmt.Errorf("xsk: ring size %d: %w", *p, ErrConfig)
		}
	}
	return c, nil
}
