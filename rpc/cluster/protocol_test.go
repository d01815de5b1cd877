package cluster

import (
	"errors"
	"strings"
	"testing"
)

func TestParseProtocol(t *testing.T) {
	tests := []struct {
		in   string
		want Protocol
		star bool
	}{
		{"grpc", ProtocolGRPC, false},
		{"", ProtocolGRPC, false},
		{" GRPC+Seastar ", ProtocolGRPCSeastar, true},
		{"grpc+seastar", ProtocolGRPCSeastar, true},
		{"star_server", ProtocolGRPCSeastar, true},
		{"star_server_lite", ProtocolGRPCSeastar, true},
	}
	for _, tt := range tests {
		p, err := ParseProtocol(tt.in)
		if err != nil || p != tt.want || p.UsesStar() != tt.star {
			t.Errorf("ParseProtocol(%q) = %q (star %v), %v; want %q", tt.in, p, p.UsesStar(), err, tt.want)
		}
	}
	for _, bad := range []string{"grpc+verbs", "grpc++", "seastar", "grpc+seastar+x", "http"} {
		_, err := ParseProtocol(bad)
		if !errors.Is(err, ErrUnknownProtocol) {
			t.Errorf("ParseProtocol(%q) = %v, want ErrUnknownProtocol", bad, err)
			continue
		}
		for _, valid := range []string{`"grpc"`, `"grpc+seastar"`, `"star_server"`, bad} {
			if !strings.Contains(err.Error(), valid) {
				t.Errorf("ParseProtocol(%q): %q does not mention %s", bad, err, valid)
			}
		}
	}
}
