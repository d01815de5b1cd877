package flags

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestAFXDP: --afxdp reads its three modes and the boolean aliases, in any
// case, and refuses anything else naming the flag, the value and what it
// wants.
func TestAFXDP(t *testing.T) {
	for in, want := range map[string]AFXDP{
		"auto": AFXDPAuto, "on": AFXDPOn, "off": AFXDPOff, "ON": AFXDPOn,
		"true": AFXDPOn, "false": AFXDPOff, "1": AFXDPOn, "0": AFXDPOff, "False": AFXDPOff,
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var a AFXDP
		RegisterAFXDP(fs, &a, AFXDPAuto, "move calls")
		if err := fs.Parse([]string{"--afxdp", in}); err != nil || a != want {
			t.Errorf("--afxdp %s: %v, %v; want %v", in, a, err, want)
		}
	}
	for _, bad := range []string{"maybe", "", "yes", "onn"} {
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
