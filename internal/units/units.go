// Package units is the one grammar of the sizes and counts that starwire's
// flags and environment variables carry: ParseSize and FormatSize for
// byte sizes ("64", "4KiB", "16MiB"), ParseCount for whole numbers in a
// range.
package units

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// Errors ParseSize and ParseCount return, for errors.Is.
var (
	ErrSyntax   = errors.New("not a whole number")
	ErrNegative = errors.New("negative")
	ErrRange    = errors.New("out of range")
)

// sizeUnits are the suffixes ParseSize accepts, longest first so that
// "KiB" is not read as "B".
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
}

// ParseSize reads a byte size: a whole number of bytes, or one followed
// by a unit, B, K or KiB (2¹⁰), M or MiB (2²⁰), G or GiB (2³⁰), with or
// without a space between; space around it is ignored. It refuses an
// empty string, fractions, negative sizes (ErrNegative) and sizes over
// math.MaxInt64 bytes (ErrRange). What FormatSize writes, it reads back.
func ParseSize(s string) (int64, error) {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := parseInt(num)
	if err != nil {
		return 0, err
	}
	if n > math.MaxInt64/mult {
		return 0, ErrRange
	}
	return n * mult, nil
}

// FormatSize writes n in the largest unit that divides it: 64B, 4KiB, 16MiB.
func FormatSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10) + "B"
}

// ParseCount reads a whole number from lo to hi (lo ≥ 0); space around it
// is ignored. It refuses an empty string, signs, fractions, negative
// numbers (ErrNegative) and numbers outside lo..hi (ErrRange).
func ParseCount(s string, lo, hi int) (int, error) {
	n, err := parseInt(strings.TrimSpace(s))
	if err != nil {
		return 0, err
	}
	if n < int64(lo) || n > int64(hi) {
		return 0, ErrRange
	}
	return int(n), nil
}

// parseInt reads a non-negative decimal number of digits only.
func parseInt(s string) (int64, error) {
	if strings.HasPrefix(s, "-") {
		if _, err := strconv.ParseInt(s, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
			return 0, ErrNegative
		}
		return 0, ErrSyntax
	}
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, ErrSyntax // "+4", " 4" inside a unit, "", "x"
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 0, ErrRange
	}
	if err != nil {
		return 0, ErrSyntax
	}
	return n, nil
}
