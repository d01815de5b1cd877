package ops_test

import (
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

func TestRegexFullMatch(t *testing.T) {
	prefixes := ConstStr("p", []int64{4}, "s3://bucket/ckpt", "/tmp/s3://ckpt", "s3://", "S3://x")
	runCases(t, []opCase{
		// The pattern of TensorFlow 2's save function.
		{"static s3 prefix", []*tfpb.NodeDef{prefixes, NodeDef("m", "StaticRegexFullMatch", In("p"), Attrs("pattern", "^s3://.*"))},
			[]string{"m"}, []wire.Tensor{Bools([]int64{4}, true, false, true, false)}},
		// Full match: a pattern matching a substring only is false.
		{"static whole string", []*tfpb.NodeDef{prefixes, NodeDef("m", "StaticRegexFullMatch", In("p"), Attrs("pattern", "s3|ckpt"))},
			[]string{"m"}, []wire.Tensor{Bools([]int64{4}, false, false, false, false)}},
		{"static alternation anchored as a whole", []*tfpb.NodeDef{prefixes, NodeDef("m", "StaticRegexFullMatch", In("p"), Attrs("pattern", "s3://|/tmp.*"))},
			[]string{"m"}, []wire.Tensor{Bools([]int64{4}, false, true, true, false)}},
		{"static scalar, RE2 flags", []*tfpb.NodeDef{ConstStr("s", nil, "S3://X"), NodeDef("m", "StaticRegexFullMatch", In("s"), Attrs("pattern", "(?i)s3://x"))},
			[]string{"m"}, []wire.Tensor{Bools(nil, true)}},
		{"dynamic pattern", []*tfpb.NodeDef{prefixes, ConstStr("pat", nil, `[a-zA-Z0-9]+://.+`), NodeDef("m", "RegexFullMatch", In("p", "pat"), nil)},
			[]string{"m"}, []wire.Tensor{Bools([]int64{4}, true, false, false, true)}},
	})
	runErrCases(t, []errCase{
		{"bad static pattern", []*tfpb.NodeDef{prefixes, NodeDef("out", "StaticRegexFullMatch", In("p"), Attrs("pattern", "(s3"))}, wire.InvalidArgument, "invalid pattern"},
		{"missing pattern", []*tfpb.NodeDef{prefixes, NodeDef("out", "StaticRegexFullMatch", In("p"), nil)}, wire.InvalidArgument, `missing attr "pattern"`},
		{"not strings", []*tfpb.NodeDef{ConstF32("x", nil, 1), NodeDef("out", "StaticRegexFullMatch", In("x"), Attrs("pattern", "x"))}, wire.InvalidArgument, "input 0 is float, want string"},
		{"bad dynamic pattern", []*tfpb.NodeDef{prefixes, ConstStr("pat", nil, "a)"), NodeDef("out", "RegexFullMatch", In("p", "pat"), nil)}, wire.InvalidArgument, "invalid pattern"},
		{"dynamic pattern not a scalar", []*tfpb.NodeDef{prefixes, ConstStr("pat", []int64{1}, "a"), NodeDef("out", "RegexFullMatch", In("p", "pat"), nil)}, wire.InvalidArgument, "pattern must be a scalar"},
	})
}
