package units

import (
	"errors"
	"math"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  error
	}{
		{"0", 0, nil},
		{"64", 64, nil},
		{" 65536 ", 65536, nil},
		{"64B", 64, nil},
		{"4K", 4 << 10, nil},
		{"4KiB", 4 << 10, nil},
		{"16M", 16 << 20, nil},
		{"16MiB", 16 << 20, nil},
		{"2G", 2 << 30, nil},
		{"2GiB", 2 << 30, nil},
		{"64 KiB", 64 << 10, nil},
		{"9223372036854775807", math.MaxInt64, nil},
		{"8589934591GiB", 8589934591 << 30, nil},
		{"8589934592GiB", 0, ErrRange}, // 2⁶³ bytes
		{"9223372036854775808", 0, ErrRange},
		{"99999999999999999999KiB", 0, ErrRange},
		{"-1", 0, ErrNegative},
		{"-4KiB", 0, ErrNegative},
		{"", 0, ErrSyntax},
		{"   ", 0, ErrSyntax},
		{"KiB", 0, ErrSyntax},
		{"B", 0, ErrSyntax},
		{"+4", 0, ErrSyntax},
		{"1.5MiB", 0, ErrSyntax},
		{"4kib", 0, ErrSyntax},
		{"4TiB", 0, ErrSyntax},
		{"x", 0, ErrSyntax},
		{"4KiBB", 0, ErrSyntax},
	} {
		got, err := ParseSize(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// What FormatSize writes, ParseSize reads back.
func TestFormatSizeRoundTrip(t *testing.T) {
	for _, n := range []int64{0, 1, 64, 1000, 1 << 10, 3 << 10, 1<<20 + 1, 16 << 20, 1 << 30, math.MaxInt64} {
		s := FormatSize(n)
		if back, err := ParseSize(s); back != n || err != nil {
			t.Errorf("FormatSize(%d) = %q, read back as %d, %v", n, s, back, err)
		}
	}
	if got := FormatSize(64 << 10); got != "64KiB" {
		t.Errorf("FormatSize(64KiB) = %q", got)
	}
}

func TestParseCount(t *testing.T) {
	for _, tc := range []struct {
		in     string
		lo, hi int
		want   int
		err    error
	}{
		{"4", 1, 1024, 4, nil},
		{" 16 ", 1, 1024, 16, nil},
		{"1", 1, 1024, 1, nil},
		{"1024", 1, 1024, 1024, nil},
		{"0", 0, 10, 0, nil},
		{"0", 1, 1024, 0, ErrRange},
		{"1025", 1, 1024, 0, ErrRange},
		{"100000000000000000000", 1, 1024, 0, ErrRange},
		{"-3", 1, 1024, 0, ErrNegative},
		{"", 1, 1024, 0, ErrSyntax},
		{"2.5", 1, 1024, 0, ErrSyntax},
		{"4K", 1, 1 << 20, 0, ErrSyntax}, // counts take no units
		{"+4", 1, 1024, 0, ErrSyntax},
		{"abc", 1, 1024, 0, ErrSyntax},
	} {
		got, err := ParseCount(tc.in, tc.lo, tc.hi)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("ParseCount(%q, %d, %d) = %d, %v; want %d, %v", tc.in, tc.lo, tc.hi, got, err, tc.want, tc.err)
		}
	}
}
