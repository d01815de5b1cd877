package driver

import (
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/wire/tfpb"
)

// parseTask splits "/job:ps/replica:0/task:1" into its job and index.
func parseTask(task string) (job string, index int, ok bool) {
	rest, ok := strings.CutPrefix(task, "/job:")
	if !ok {
		return "", 0, false
	}
	job, rest, ok = strings.Cut(rest, "/replica:")
	if !ok {
		return "", 0, false
	}
	_, idx, ok := strings.Cut(rest, "/task:")
	if !ok {
		return "", 0, false
	}
	index, err := strconv.Atoi(idx)
	return job, index, err == nil
}

func cloneServerDef(sd *tfpb.ServerDef) *tfpb.ServerDef { return proto.CloneOf(sd) }
