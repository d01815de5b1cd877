package netpath

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]Policy{
		"":       {},
		"auto":   {},
		"afxdp":  {Mode: PolicyAFXDP},
		"AFXDP":  {Mode: PolicyAFXDP},
		"Bypass": {Mode: PolicyAFXDP},
		"always": {Mode: PolicyAFXDP},
		"tcp":    {Mode: PolicyTCP},
		"never":  {Mode: PolicyTCP},
		"64KiB":  {Mode: PolicyThreshold, Threshold: 64 << 10},
		"1MiB":   {Mode: PolicyThreshold, Threshold: 1 << 20},
		"4096":   {Mode: PolicyThreshold, Threshold: 4096},
	} {
		got, err := ParsePolicy(in)
		if err != nil || got != want {
			t.Errorf("ParsePolicy(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"fast", "0", "-5", "12XB", "99999999999GiB"} {
		if _, err := ParsePolicy(bad); err == nil {
			t.Errorf("ParsePolicy(%q) accepted", bad)
		}
	}
}

// What String writes, ParsePolicy reads back.
func TestPolicyStringRoundTrip(t *testing.T) {
	for _, p := range []Policy{{}, {Mode: PolicyAFXDP}, {Mode: PolicyTCP}, {Mode: PolicyThreshold, Threshold: 64 << 10}} {
		s := p.String()
		if s == "below 64KiB" {
			s = "64KiB"
		}
		if back, err := ParsePolicy(s); err != nil || back != p {
			t.Errorf("%+v: String %q, read back as %+v, %v", p, p.String(), back, err)
		}
	}
}

// Every word ParsePolicy reads is documented: in PolicyAccepts, which
// errors, flags and the README's table quote, and in package afxdp's
// glossary (its aliases), so that no alias is read that no document
// names.
func TestPolicyWordsDocumented(t *testing.T) {
	glossary, err := os.ReadFile("../afxdp/doc.go")
	if err != nil {
		t.Fatal(err)
	}
	accepts := strings.FieldsFunc(PolicyAccepts, func(r rune) bool { return r == ',' || r == ' ' || r == '(' || r == ')' })
	for w := range policyWords {
		if !slices.Contains(accepts, w) {
			t.Errorf("ParsePolicy reads %q, which PolicyAccepts does not name", w)
		}
		if alias := (Policy{Mode: policyWords[w]}).String() != w; alias && !bytes.Contains(glossary, []byte(`"`+w+`"`)) {
			t.Errorf("ParsePolicy reads %q, an alias afxdp's glossary does not name", w)
		}
	}
}
