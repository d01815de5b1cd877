// Package logline writes slog records as the command's other lines are
// written: one plain line each, "starwire: warning: msg key=value ...",
// without a timestamp or level= and msg= keys.
package logline

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
)

// New returns a logger writing records of level Warn and above to w, one
// line each, after prefix. It is safe for concurrent use.
func New(w io.Writer, prefix string) *slog.Logger {
	return NewLevel(w, prefix, slog.LevelWarn)
}

// NewLevel is New writing records of level min and above; those below Warn
// carry no label.
func NewLevel(w io.Writer, prefix string, min slog.Level) *slog.Logger {
	return slog.New(&handler{out: &output{w: w}, prefix: prefix, min: min})
}

// output serializes the lines of a logger and the loggers derived from it.
type output struct {
	mu sync.Mutex
	w  io.Writer
}

type handler struct {
	out    *output
	prefix string
	min    slog.Level
	attrs  string // " key=value" of WithAttrs, groups applied
	group  string // "g." of WithGroup, for the keys that follow
}

func (h *handler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.min }

func (h *handler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(h.prefix)
	switch {
	case r.Level >= slog.LevelError:
		b.WriteString("error: ")
	case r.Level >= slog.LevelWarn:
		b.WriteString("warning: ")
	}
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, h.group, a)
		return true
	})
	b.WriteByte('\n')
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	_, err := io.WriteString(h.out.w, b.String())
	return err
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range as {
		appendAttr(&b, h.group, a)
	}
	c := *h
	c.attrs = b.String()
	return &c
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group += name + "."
	return &c
}

// appendAttr writes " key=value", quoting a value with spaces or quotes.
func appendAttr(b *strings.Builder, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		g := group
		if a.Key != "" {
			g += a.Key + "."
		}
		for _, ga := range a.Value.Group() {
			appendAttr(b, g, ga)
		}
		return
	}
	v := a.Value.String()
	if v == "" || strings.ContainsAny(v, " \t\n\"=") {
		v = strconv.Quote(v)
	}
	b.WriteByte(' ')
	b.WriteString(group)
	b.WriteString(a.Key)
	b.WriteByte('=')
	b.WriteString(v)
}
