package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/starwire/starwire/wire/tfpb"
	"google.golang.org/protobuf/proto"
)

// Merge joins the checkpoints under the src prefixes (the shards of one
// save) into one under dst, as TensorFlow's MergeV2Checkpoints does: each
// entry is re-pointed at its data file's new shard number, the slice lists
// of a tensor saved in parts by several shards are concatenated, the data
// files are renamed to dst.data-SSSSS-of-NNNNN and the merged index is
// written; the source indexes are then deleted. With deleteOld, the
// sources' directories are removed too when empty and not dst's.
//
// The merged header counts the data files, which is TensorFlow's count
// (the sum of the sources' counts) whenever each source has one data file,
// as SaveV2's shards do.
func Merge(src []string, dst string, deleteOld bool) error {
	if len(src) == 0 {
		return fmt.Errorf("checkpoint merge into %s: no sources: %w", dst, ErrNotFound)
	}
	var (
		header  *tfpb.BundleHeaderProto
		entries = make(map[string]*tfpb.BundleEntryProto)
		files   []string // old data file paths, by new shard id
		shardOf = make(map[string]int32)
	)
	for _, prefix := range src {
		path := IndexFile(prefix)
		data, err := os.ReadFile(path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				err = fmt.Errorf("%w: %w", err, ErrNotFound)
			}
			return fmt.Errorf("checkpoint merge: %w", err)
		}
		r, err := parseIndex(prefix, path, data)
		if err != nil {
			return fmt.Errorf("checkpoint merge: %w", err)
		}
		h := &tfpb.BundleHeaderProto{}
		_, hv := r.tab.At(0)
		if err := proto.Unmarshal(hv, h); err != nil {
			return fmt.Errorf("checkpoint merge: %s: header: %v: %w", path, err, ErrCorrupt)
		}
		if header == nil {
			header = h
		} else if h.Endianness != header.Endianness || !proto.Equal(h.Version, header.Version) {
			return fmt.Errorf("checkpoint merge: %s: header %v differs from %v: %w", path, h, header, ErrMismatch)
		}
		for i := 1; i < r.tab.Len(); i++ {
			k, v := r.tab.At(i)
			key := string(k)
			e, err := r.parseEntry(key, v)
			if err != nil {
				return fmt.Errorf("checkpoint merge: %w", err)
			}
			if old, dup := entries[key]; dup {
				if len(old.Slices) == 0 || len(e.Slices) == 0 {
					return fmt.Errorf("checkpoint merge: %s: tensor %q in two sources: %w", path, key, ErrMismatch)
				}
				if old.Dtype != e.Dtype || !equalShape(shapeOf(old.Shape), shapeOf(e.Shape)) {
					return fmt.Errorf("checkpoint merge: %s: tensor %q saved as %v%v and %v%v: %w", path, key,
						old.Dtype, shapeOf(old.Shape), e.Dtype, shapeOf(e.Shape), ErrMismatch)
				}
				old.Slices = append(old.Slices, e.Slices...)
				continue
			}
			// As TensorFlow, a slice list's entry is re-pointed too (at
			// shard 0 of its source), so merged indexes match byte for byte.
			file := DataFile(prefix, int(e.ShardId), r.numShards)
			id, ok := shardOf[file]
			if !ok {
				id = int32(len(files))
				shardOf[file] = id
				files = append(files, file)
			}
			e.ShardId = id
			entries[key] = e
		}
	}
	if len(files) > 99999 {
		return fmt.Errorf("checkpoint merge into %s: %d data files: %w", dst, len(files), ErrMismatch)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("checkpoint merge: %w", err)
	}
	for id, old := range files {
		if err := os.Rename(old, DataFile(dst, id, len(files))); err != nil {
			return fmt.Errorf("checkpoint merge into %s: %w", dst, err)
		}
	}
	header.NumShards = int32(max(len(files), 1))
	tmp := IndexFile(dst) + ".tempstate"
	if err := writeIndex(tmp, header, entries); err != nil {
		return fmt.Errorf("checkpoint merge into %s: %w", dst, err)
	}
	if err := os.Rename(tmp, IndexFile(dst)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("checkpoint merge into %s: %w", dst, err)
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return err
	}
	for _, prefix := range src {
		if IndexFile(prefix) != IndexFile(dst) {
			os.Remove(IndexFile(prefix)) // best effort, as TensorFlow
		}
	}
	if deleteOld {
		dstDir := filepath.Clean(filepath.Dir(dst))
		for _, prefix := range src {
			if dir := filepath.Clean(filepath.Dir(prefix)); dir != dstDir {
				os.Remove(dir) // only if empty; later sources find it gone
			}
		}
	}
	return nil
}
