package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/starwire/starwire/wire/tfpb"
	"google.golang.org/protobuf/encoding/prototext"
)

// StateFile is the name of the file, in a checkpoint directory, that lists
// its checkpoints (a text-format CheckpointState).
const StateFile = "checkpoint"

// State is a directory's CheckpointState: the newest checkpoint's prefix
// and all kept ones, oldest first, as written (relative to the directory
// when inside it).
type State struct {
	ModelCheckpointPath     string
	AllModelCheckpointPaths []string
}

// ReadState reads dir's state file. A missing file is ErrNoCheckpoint; an
// unparsable one ErrCorrupt.
func ReadState(dir string) (State, error) {
	st, err := readState(dir)
	if err != nil {
		return State{}, err
	}
	return State{ModelCheckpointPath: st.ModelCheckpointPath, AllModelCheckpointPaths: st.AllModelCheckpointPaths}, nil
}

func readState(dir string) (*tfpb.CheckpointState, error) {
	path := filepath.Join(dir, StateFile)
	b, err := os.ReadFile(path)
	if err != nil {
		// err names the state file.
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("checkpoint state: %w: %w", err, ErrNoCheckpoint)
		}
		return nil, fmt.Errorf("checkpoint state: %w", err)
	}
	var st tfpb.CheckpointState
	if err := prototext.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("checkpoint state %s: %v: %w", path, err, ErrCorrupt)
	}
	return &st, nil
}

// Latest returns the prefix of dir's newest checkpoint, as
// tf.train.latest_checkpoint does: the state's model_checkpoint_path,
// joined to dir when relative, provided its index exists. Otherwise it
// returns "" and an error wrapping ErrNoCheckpoint.
func Latest(dir string) (string, error) {
	st, err := ReadState(dir)
	if err != nil {
		return "", err
	}
	if st.ModelCheckpointPath == "" {
		return "", fmt.Errorf("checkpoint state %s names no checkpoint: %w", filepath.Join(dir, StateFile), ErrNoCheckpoint)
	}
	p := resolve(dir, st.ModelCheckpointPath)
	if _, err := os.Stat(IndexFile(p)); err != nil {
		return "", fmt.Errorf("checkpoint %s named by %s: %w: %w", p, filepath.Join(dir, StateFile), err, ErrNoCheckpoint)
	}
	return p, nil
}

func resolve(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// Keep records newest (a checkpoint prefix, absolute or relative to dir)
// as dir's newest checkpoint and deletes the files of all but the newest
// max checkpoints the state lists (max <= 0 keeps all), as
// tf.train.CheckpointManager does. The state file is replaced atomically
// before anything is deleted, so it never names a deleted checkpoint.
func Keep(dir, newest string, max int) error {
	st, err := readState(dir)
	if errors.Is(err, ErrNoCheckpoint) {
		st, err = &tfpb.CheckpointState{}, nil
	}
	if err != nil {
		return err
	}
	name := relative(dir, newest)
	if !utf8.ValidString(name) {
		// The state's paths are proto3 strings: TensorFlow and prototext
		// refuse to read other bytes.
		return fmt.Errorf("checkpoint state %s: path %q is not UTF-8: %w", filepath.Join(dir, StateFile), name, ErrMismatch)
	}
	now := float64(time.Now().UnixNano()) / 1e9
	// Timestamps are kept only while they pair up with the paths (an older
	// writer's file has none).
	stamps := st.AllModelCheckpointTimestamps
	withTimes := len(stamps) == len(st.AllModelCheckpointPaths)
	var paths []string
	var times []float64
	for i, p := range st.AllModelCheckpointPaths {
		if resolve(dir, p) == resolve(dir, name) {
			continue
		}
		paths = append(paths, p)
		if withTimes {
			times = append(times, stamps[i])
		}
	}
	paths = append(paths, name)
	if withTimes {
		times = append(times, now)
	}
	var drop []string
	if max > 0 && len(paths) > max {
		cut := len(paths) - max
		drop, paths = paths[:cut], slices.Clone(paths[cut:])
		if withTimes {
			times = times[cut:]
		}
	}
	next := &tfpb.CheckpointState{
		ModelCheckpointPath:          name,
		AllModelCheckpointPaths:      paths,
		AllModelCheckpointTimestamps: times,
		LastPreservedTimestamp:       st.LastPreservedTimestamp,
	}
	if err := writeState(dir, next); err != nil {
		return err
	}
	for _, p := range drop {
		if err := removeCheckpoint(resolve(dir, p)); err != nil {
			return err
		}
	}
	return nil
}

// relative returns p relative to dir when inside it, as TensorFlow writes
// paths in the state file.
func relative(dir, p string) string {
	if !filepath.IsAbs(p) {
		return p
	}
	if rel, err := filepath.Rel(dir, p); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}

// removeCheckpoint deletes a checkpoint's index and data files.
func removeCheckpoint(prefix string) error {
	files, err := filepath.Glob(globEscape(prefix) + ".data-?????-of-?????")
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", prefix, err)
	}
	files = append(files, IndexFile(prefix))
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("checkpoint %s: %w", prefix, err)
		}
	}
	return nil
}

func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// writeState replaces dir's state file atomically, in the text format
// Python's text_format writes (one field per line).
func writeState(dir string, st *tfpb.CheckpointState) error {
	var b strings.Builder
	field := func(k, v string) { b.WriteString(k + ": " + v + "\n") }
	field("model_checkpoint_path", quote(st.ModelCheckpointPath))
	for _, p := range st.AllModelCheckpointPaths {
		field("all_model_checkpoint_paths", quote(p))
	}
	for _, t := range st.AllModelCheckpointTimestamps {
		field("all_model_checkpoint_timestamps", formatFloat(t))
	}
	if st.LastPreservedTimestamp != 0 {
		field("last_preserved_timestamp", formatFloat(st.LastPreservedTimestamp))
	}
	path := filepath.Join(dir, StateFile)
	tmp := path + ".tmp" + strconv.FormatInt(time.Now().UnixNano(), 36)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		_, err = f.WriteString(b.String())
		if err == nil {
			err = syncClose(f)
		} else {
			f.Close()
		}
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("checkpoint state %s: %w", path, err)
	}
	return syncDir(dir)
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// quote escapes s as protobuf's text format does (C escapes, other bytes
// outside printable ASCII in octal), which prototext and Python parse.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '"':
			b.WriteString(`\"`)
		case '\'':
			b.WriteString(`\'`)
		case '\\':
			b.WriteString(`\\`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
