package main

import (
	"context"
	endian "encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/wire"
)

const checkpointUsage = `usage: starwire checkpoint inspect PREFIX|DIR [--tensor NAME] [--all]
       starwire checkpoint inspect DIR --list
       starwire checkpoint follow DIR [--once] [--interval D] [--wait D]

  inspect  list the tensors of the TensorFlow checkpoint under PREFIX (the
           files PREFIX.index and PREFIX.data-*; PREFIX.index itself will
           do), or the newest one of directory DIR (named by its
           "checkpoint" file, as tf.train.latest_checkpoint finds it), as
           TensorFlow's inspect_checkpoint does: "name (DT_FLOAT) [10,4]"
           per tensor and the total number of parameters; --all prints
           every tensor's values, --tensor one tensor's; --list lists
           DIR's checkpoints instead, oldest first: each full one its
           state file keeps and the increments saved after it (under
           .incremental_checkpoint), with global step and size on disk
  follow   replay the change stream a ps exports into DIR (serve
           --stream_dir) into tables of its own, version by version,
           printing what each applied; --once stops at the newest.
           Started before its ps, it waits for DIR to be made, saying
           so on stderr every 5 s, until interrupted or for --wait D;
           with --once it fails at once unless --wait is given
`

// checkpointCmd runs "starwire checkpoint <subcommand>".
func checkpointCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprint(stdout, checkpointUsage)
		if len(args) == 0 {
			return flags.Usagef("checkpoint: give a subcommand: inspect or follow")
		}
		return nil
	}
	switch args[0] {
	case "inspect":
		return checkpointInspect(args[1:], stdout)
	case "follow":
		return checkpointFollow(ctx, args[1:], stdout)
	}
	return flags.Usagef("checkpoint: unknown subcommand %q (want inspect or follow)", args[0])
}

func checkpointInspect(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("checkpoint inspect", flag.ContinueOnError)
	tensor := fs.String("tensor", "", "print the values of this tensor only")
	all := fs.Bool("all", false, "print the values of every tensor")
	list := fs.Bool("list", false, "list the full checkpoints of DIR and their increments")
	prefix, err := parseWithArg(fs, args, stdout)
	if err != nil {
		return err
	}
	if prefix == "" {
		return flags.Usagef("checkpoint inspect: give the checkpoint's PREFIX")
	}
	if *list {
		return listCheckpoints(stdout, prefix)
	}
	if err := inspect(stdout, prefix, *tensor, *all); err != nil {
		return fmt.Errorf("checkpoint inspect: %w", err)
	}
	return nil
}

// inspect prints what checkpoint inspect prints of the checkpoint the
// user named arg: its tensors, or the values of one or all of them.
func inspect(stdout io.Writer, arg, tensor string, all bool) error {
	prefix, err := checkpointPrefix(arg)
	if err != nil {
		return err
	}
	r, err := checkpoint.Open(prefix)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return notFound(arg, prefix)
	} else if err != nil {
		return err
	}
	defer r.Close()
	switch {
	case tensor != "":
		if _, ok := r.Entry(tensor); !ok {
			return fmt.Errorf("tensor %q not found in checkpoint %s: %w", tensor, prefix, checkpoint.ErrNotFound)
		}
		if err := printTensor(stdout, r, tensor); err != nil {
			return err
		}
	case all:
		for _, e := range r.Entries() {
			if err := printTensor(stdout, r, e.Name); err != nil {
				return err
			}
		}
	default:
		for _, e := range r.Entries() {
			fmt.Fprintf(stdout, "%s (%s) %s\n", e.Name, tfTypeName(e.DType), tfShape(e.Shape))
		}
		fmt.Fprintln(stdout) // Python's print after the listing's own newline
	}
	fmt.Fprintf(stdout, "# Total number of params: %d\n", totalParams(r))
	return nil
}

// notFound is the error of arg, read as the checkpoint under prefix,
// whose index does not exist: it names what the user gave and the file
// looked for, and the directory when that is missing too.
func notFound(arg, prefix string) error {
	what := fmt.Sprintf("no checkpoint at %s: its index %s does not exist", arg, checkpoint.IndexFile(prefix))
	if dir := filepath.Dir(prefix); !exists(dir) {
		what += fmt.Sprintf(", nor does the directory %s", dir)
	}
	return fmt.Errorf(`%s (give a checkpoint's PREFIX, one of its files, or a directory whose %q file names one): %w`,
		what, checkpoint.StateFile, checkpoint.ErrNotFound)
}

// exists says whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}

// dataShard matches the end of a data file's name: ".data-00000-of-00001".
var dataShard = regexp.MustCompile(`\.data-[0-9]{5}-of-[0-9]{5}$`)

// checkpointPrefix reads what the user named as TensorFlow's tools do: a
// checkpoint's prefix, one of its files (PREFIX.index, PREFIX.data-*), or
// a directory, whose "checkpoint" file names its newest checkpoint.
func checkpointPrefix(arg string) (string, error) {
	if info, err := os.Stat(arg); err == nil && info.IsDir() {
		p, err := checkpoint.Latest(arg)
		if err != nil {
			return "", fmt.Errorf("%s is a directory, and its newest checkpoint cannot be found: %w", arg, err)
		}
		return p, nil
	}
	if p, ok := strings.CutSuffix(arg, ".index"); ok {
		return p, nil
	}
	if loc := dataShard.FindStringIndex(arg); loc != nil {
		return arg[:loc[0]], nil
	}
	return arg, nil
}

func printTensor(w io.Writer, r *checkpoint.Reader, name string) error {
	fmt.Fprintf(w, "tensor_name:  %s\n", name)
	t, err := r.Read(name)
	if err != nil {
		return err
	}
	elems, err := formatElems(t)
	if err != nil {
		return fmt.Errorf("tensor %q: %w", name, err)
	}
	fmt.Fprintln(w, layout(elems, t.Shape))
	return nil
}

func totalParams(r *checkpoint.Reader) int64 {
	var n int64
	for _, e := range r.Entries() {
		c := int64(1)
		for _, d := range e.Shape {
			c *= d
		}
		n += c
	}
	return n
}

// tfTypeName is TensorFlow's DataType_Name: "DT_FLOAT".
func tfTypeName(dt wire.DataType) string { return "DT_" + strings.ToUpper(dt.String()) }

// tfShape is TensorShape::DebugString: "[10,4]", "[]" for a scalar.
func tfShape(shape []int64) string {
	s := make([]string, len(shape))
	for i, d := range shape {
		s[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(s, ",") + "]"
}

// formatElems formats each element as numpy prints it, roughly: floats
// shortest, integral ones with a trailing ".", strings as b'...'.
func formatElems(t wire.Tensor) ([]string, error) {
	if t.DType == wire.DTString {
		elems, err := t.Strings(nil)
		if err != nil {
			return nil, err
		}
		out := make([]string, len(elems))
		for i, e := range elems {
			out[i] = pyBytes(e)
		}
		return out, nil
	}
	sz := t.DType.Size()
	out := make([]string, 0, len(t.Data)/sz)
	le := endian.LittleEndian
	for p := 0; p+sz <= len(t.Data); p += sz {
		b := t.Data[p : p+sz]
		var s string
		switch t.DType {
		case wire.DTFloat:
			s = pyFloat(float64(math.Float32frombits(le.Uint32(b))), 32)
		case wire.DTDouble:
			s = pyFloat(math.Float64frombits(le.Uint64(b)), 64)
		case wire.DTHalf:
			s = pyFloat(float64(halfToFloat(le.Uint16(b))), 32)
		case wire.DTBfloat16:
			s = pyFloat(float64(math.Float32frombits(uint32(le.Uint16(b))<<16)), 32)
		case wire.DTComplex64:
			s = pyComplex(float64(math.Float32frombits(le.Uint32(b))), float64(math.Float32frombits(le.Uint32(b[4:]))), 32)
		case wire.DTComplex128:
			s = pyComplex(math.Float64frombits(le.Uint64(b)), math.Float64frombits(le.Uint64(b[8:])), 64)
		case wire.DTBool:
			s = "False"
			if b[0] != 0 {
				s = "True"
			}
		case wire.DTInt8, wire.DTQint8:
			s = strconv.Itoa(int(int8(b[0])))
		case wire.DTUint8, wire.DTQuint8:
			s = strconv.Itoa(int(b[0]))
		case wire.DTInt16, wire.DTQint16:
			s = strconv.Itoa(int(int16(le.Uint16(b))))
		case wire.DTUint16, wire.DTQuint16:
			s = strconv.Itoa(int(le.Uint16(b)))
		case wire.DTInt32, wire.DTQint32:
			s = strconv.Itoa(int(int32(le.Uint32(b))))
		case wire.DTUint32:
			s = strconv.FormatUint(uint64(le.Uint32(b)), 10)
		case wire.DTInt64:
			s = strconv.FormatInt(int64(le.Uint64(b)), 10)
		case wire.DTUint64:
			s = strconv.FormatUint(le.Uint64(b), 10)
		default:
			s = fmt.Sprintf("%x", b)
		}
		out = append(out, s)
	}
	return out, nil
}

func pyFloat(v float64, bits int) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(v, 'g', -1, bits)
	if !strings.ContainsAny(s, ".e") {
		s += "."
	}
	return s
}

func pyComplex(re, im float64, bits int) string {
	sign := "+"
	if im < 0 || (im == 0 && math.Signbit(im)) {
		sign, im = "-", -im
	}
	return "(" + strings.TrimSuffix(pyFloat(re, bits), ".") + sign + strings.TrimSuffix(pyFloat(im, bits), ".") + "j)"
}

func pyBytes(b []byte) string {
	var s strings.Builder
	s.WriteString("b'")
	for _, c := range b {
		switch {
		case c == '\'' || c == '\\':
			s.WriteByte('\\')
			s.WriteByte(c)
		case c == '\n':
			s.WriteString(`\n`)
		case c == '\t':
			s.WriteString(`\t`)
		case c == '\r':
			s.WriteString(`\r`)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&s, `\x%02x`, c)
		default:
			s.WriteByte(c)
		}
	}
	s.WriteByte('\'')
	return s.String()
}

// halfToFloat converts an IEEE 754 half to float32.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp == 0:
		v := float32(frac) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}

// layout nests elems in brackets by shape, as numpy prints arrays: a
// scalar bare ("3."), a vector "[1. 2.]", rows of a matrix on their own
// lines.
func layout(elems []string, shape []int64) string {
	if len(shape) == 0 {
		if len(elems) == 1 {
			return strings.TrimSuffix(elems[0], ".") + dotZero(elems[0])
		}
		return ""
	}
	var b strings.Builder
	var rec func(elems []string, shape []int64, depth int)
	rec = func(elems []string, shape []int64, depth int) {
		b.WriteByte('[')
		if len(shape) == 1 {
			b.WriteString(strings.Join(elems, " "))
		} else {
			n := int(shape[0])
			step := 0
			if n > 0 {
				step = len(elems) / n
			}
			for i := range n {
				if i > 0 {
					b.WriteString(strings.Repeat("\n", len(shape)-1))
					b.WriteString(strings.Repeat(" ", depth+1))
				}
				rec(elems[i*step:(i+1)*step], shape[1:], depth+1)
			}
		}
		b.WriteByte(']')
	}
	rec(elems, shape, 0)
	return b.String()
}

// dotZero gives an integral float scalar its ".0", as numpy prints one
// alone ("3.0") but in an array "3.".
func dotZero(s string) string {
	if strings.HasSuffix(s, ".") {
		return ".0"
	}
	return ""
}

// parseWithArg parses a checkpoint subcommand's flags and its one
// argument, which may come before or after them; it returns "" when the
// argument is missing.
func parseWithArg(fs *flag.FlagSet, args []string, stdout io.Writer) (string, error) {
	fs.SetOutput(io.Discard)
	var arg string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, checkpointUsage)
				fs.SetOutput(stdout)
				fs.PrintDefaults()
				return "", err
			}
			return "", flags.Usagef("%s: %v", fs.Name(), err)
		}
		if fs.NArg() == 0 {
			return arg, nil
		}
		if arg != "" {
			return "", flags.Usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
		}
		arg, args = fs.Arg(0), fs.Args()[1:]
	}
}
