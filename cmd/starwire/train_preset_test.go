package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/starwire/starwire/cmd/starwire/internal/lr"
)

// parseTrain parses train's flags as trainCmd does, without running.
func parseTrain(t *testing.T, args ...string) (*trainFlags, error) {
	t.Helper()
	f := trainFlags{cfg: lr.DefaultConfig()}
	if err := f.applyPreset(args); err != nil {
		return nil, err
	}
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	f.register(fs)
	if err := parseFlags(fs, args, io.Discard); err != nil {
		return nil, err
	}
	return &f, f.check()
}

// TestTrainPreset: --preset transport starts from lr.TransportConfig, and
// the flags given with it change it wherever they stand.
func TestTrainPreset(t *testing.T) {
	f, err := parseTrain(t, "--embedding_dim", "16", "--preset", "transport")
	if err != nil {
		t.Fatal(err)
	}
	want := lr.TransportConfig()
	want.EmbeddingDim = 16
	if f.cfg != want {
		t.Fatalf("config %+v, want %+v", f.cfg, want)
	}
	if f, err = parseTrain(t); err != nil || f.cfg != lr.DefaultConfig() || f.afxdpPath != "auto" {
		t.Fatalf("no flags: %+v, %v", f, err)
	}
	if _, err := parseTrain(t, "--preset", "fast"); err == nil || !strings.Contains(err.Error(), `--preset "fast"`) {
		t.Fatalf("unknown preset: %v", err)
	}
	for _, ok := range []string{"auto", "afxdp", "bypass", "tcp", "never", "64KiB"} {
		if _, err := parseTrain(t, "--afxdp_path", ok); err != nil {
			t.Errorf("--afxdp_path %s: %v", ok, err)
		}
	}
	if _, err := parseTrain(t, "--afxdp_path", "sometimes"); err == nil || !strings.Contains(err.Error(), "--afxdp_path") {
		t.Fatalf("bad --afxdp_path: %v", err)
	}
}
