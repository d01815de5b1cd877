package ops

import (
	"strings"
	"testing"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

func TestResolvePrefix(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		want   string    // the path, when accepted
		code   wire.Code // the refusal's code, when not
	}{
		{prefix: "model", want: "/ckpt/model"},
		{prefix: "a/b/model-10", want: "/ckpt/a/b/model-10"},
		{prefix: "./model", want: "/ckpt/model"},
		{prefix: "a/../model", want: "/ckpt/model"},
		{prefix: "/ckpt/model.ckpt", want: "/ckpt/model.ckpt"},
		{prefix: "/ckpt/model.ckpt_temp/part-00000-of-00002", want: "/ckpt/model.ckpt_temp/part-00000-of-00002"},
		{prefix: "/ckpt/model_temp_1d2f/part", want: "/ckpt/model_temp_1d2f/part"},
		{prefix: "/ckpt//run/../model", want: "/ckpt/model"},
		{prefix: "model_temp/part-00000-of-00001", want: "/ckpt/model_temp/part-00000-of-00001"},
		{prefix: "..model", want: "/ckpt/..model"},
		{prefix: "", code: wire.InvalidArgument},
		{prefix: "a\x00b", code: wire.InvalidArgument},
		{prefix: "../../etc/passwd", code: wire.PermissionDenied},
		{prefix: "a/../../escape", code: wire.PermissionDenied},
		{prefix: "..", code: wire.PermissionDenied},
		{prefix: ".", code: wire.PermissionDenied},
		{prefix: "/ckpt", code: wire.PermissionDenied},
		{prefix: "/ckpt/", code: wire.PermissionDenied},
		{prefix: "/ckptx/model", code: wire.PermissionDenied},
		{prefix: "/abs/path/model", code: wire.PermissionDenied},
		{prefix: "/ckpt/../etc/model", code: wire.PermissionDenied},
		{prefix: "/", code: wire.PermissionDenied},
	} {
		got, err := resolvePrefix("/ckpt", tc.prefix)
		switch {
		case tc.code == wire.OK && (err != nil || got != tc.want):
			t.Errorf("resolvePrefix(%q) = %q, %v; want %q", tc.prefix, got, err, tc.want)
		case tc.code != wire.OK && status.CodeOf(err) != tc.code:
			t.Errorf("resolvePrefix(%q) = %q, %v; want %v", tc.prefix, got, err, tc.code)
		case tc.code == wire.PermissionDenied && !strings.Contains(err.Error(), "/ckpt"):
			t.Errorf("resolvePrefix(%q): %v does not name the directory", tc.prefix, err)
		}
	}
	_, err := resolvePrefix("", "model")
	if status.CodeOf(err) != wire.FailedPrecondition || !strings.Contains(err.Error(), "--checkpoint_dir") {
		t.Errorf("without a directory: %v, want FailedPrecondition naming --checkpoint_dir", err)
	}
}
