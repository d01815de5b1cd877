package flags

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/starwire/starwire/tasks"
)

// TestPcapSaysWhyEmpty: a --pcap file that received no frame says why
// when it is closed, instead of leaving an empty file without a word.
func TestPcapSaysWhyEmpty(t *testing.T) {
	p := Pcap{Path: filepath.Join(t.TempDir(), "x.pcap")}
	tr := Transport{Net: tasks.TCPNet{}}
	if err := p.Open("serve", &tr); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := p.Close("serve", &out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "0 frames in "+p.Path) || !strings.Contains(got, "no frame went over the packet path") {
		t.Errorf("closing an empty capture says %q; want why it is empty", got)
	}
}
