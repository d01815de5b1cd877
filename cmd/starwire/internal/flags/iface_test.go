package flags

import (
	"errors"
	"net"
	"strings"
	"testing"
)

func TestCheckIface(t *testing.T) {
	ifs, err := net.Interfaces()
	if err != nil || len(ifs) == 0 {
		t.Skipf("no interfaces to name: %v", err)
	}
	if err := CheckIface("serve", ifs[0].Name); err != nil {
		t.Errorf("an interface that exists: %v", err)
	}
	if err := CheckIface("serve", ""); err != nil {
		t.Errorf("no interface given: %v", err)
	}
	err = CheckIface("serve", "noeth9")
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `--afxdp_iface "noeth9": no such interface`) || !strings.Contains(err.Error(), ifs[0].Name) {
		t.Errorf("a typo: %v; want a usage error naming the interfaces there are", err)
	}
}
