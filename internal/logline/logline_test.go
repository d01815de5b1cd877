package logline

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"
)

// TestLine: a record is one plain line after the prefix, attributes as
// key=value (quoted when they hold spaces), groups as dotted keys, and
// records below Warn are dropped.
func TestLine(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, "starwire: ")
	l.Info("not shown")
	l.With("task", "/job:ps/replica:0/task:0").WithGroup("tls").Warn("rpc: tls: client refused", "peer", "127.0.0.1:5", "err", errors.New("bad certificate"))
	l.Error("stopped", slog.Group("path", "calls", 3))
	want := "starwire: warning: rpc: tls: client refused task=/job:ps/replica:0/task:0 tls.peer=127.0.0.1:5 tls.err=\"bad certificate\"\n" +
		"starwire: error: stopped path.calls=3\n"
	if got := buf.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
