package flags

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestAFXDP: --afxdp reads its three modes in any case and, as aliases
// of on and off, what a boolean flag reads (those its help names among
// them), and refuses anything else naming the flag, the value and what it
// wants.
func TestAFXDP(t *testing.T) {
	aliases := map[string]AFXDP{
		"true": AFXDPOn, "false": AFXDPOff, "1": AFXDPOn, "0": AFXDPOff, "False": AFXDPOff,
		"t": AFXDPOn, "F": AFXDPOff, "TRUE": AFXDPOn,
	}
	bools := flag.NewFlagSet("t", flag.ContinueOnError)
	b := bools.Bool("b", false, "")
	for in, want := range aliases {
		if err := bools.Set("b", in); err != nil || *b != (want == AFXDPOn) {
			t.Errorf("a boolean flag reads %s as %v, %v; --afxdp would read it as %v", in, *b, err, want)
		}
	}
	help := flag.NewFlagSet("t", flag.ContinueOnError)
	var h AFXDP
	RegisterAFXDP(help, &h, AFXDPAuto, "move calls")
	for _, in := range []string{`"true"`, `"false"`, "1 and 0", "t and f"} {
		if !strings.Contains(help.Lookup("afxdp").Usage, in) {
			t.Errorf("the help does not name the alias %s: %s", in, help.Lookup("afxdp").Usage)
		}
	}
	aliases["auto"], aliases["on"], aliases["off"], aliases["ON"], aliases["Auto"] = AFXDPAuto, AFXDPOn, AFXDPOff, AFXDPOn, AFXDPAuto
	for in, want := range aliases {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var a AFXDP
		RegisterAFXDP(fs, &a, AFXDPAuto, "move calls")
		if err := fs.Parse([]string{"--afxdp", in}); err != nil || a != want {
			t.Errorf("--afxdp %s: %v, %v; want %v", in, a, err, want)
		}
	}
	for _, bad := range []string{"maybe", "", "yes", "onn", "2", "tRuE"} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var a AFXDP
		RegisterAFXDP(fs, &a, AFXDPOff, "move calls")
		err := fs.Parse([]string{"--afxdp=" + bad})
		if err == nil || !strings.Contains(err.Error(), `--afxdp "`+bad+`": want "auto", "on" or "off"`) {
			t.Errorf("--afxdp=%q: %v", bad, err)
		}
		if a != AFXDPOff {
			t.Errorf("--afxdp=%q changed the value to %v", bad, a)
		}
	}
	for _, m := range []AFXDP{AFXDPAuto, AFXDPOn, AFXDPOff} {
		var back AFXDP
		if err := back.Set(m.String()); err != nil || back != m {
			t.Errorf("%v: read back as %v, %v", m, back, err)
		}
	}
}
