package changes

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
)

// A Manifest names a version's parts. It is JSON, so that a person can
// read it, and is written after every part it names.
type Manifest struct {
	Version int64 `json:"version"`
	// Base marks a version holding every table in full: a new follower
	// starts at the newest one.
	Base bool `json:"base"`
	// Since and Upto are the row versions (global steps) the version
	// covers: rows updated at Since or later, and later updates from Upto
	// on belong to the next version.
	Since int64      `json:"since"`
	Upto  int64      `json:"upto"`
	Parts []PartInfo `json:"parts"`
}

// PartInfo is what a manifest says of one part.
type PartInfo struct {
	Table   string `json:"table"`
	File    string `json:"file"`
	Bytes   int64  `json:"bytes"`
	CRC32C  uint32 `json:"crc32c"`
	Full    bool   `json:"full"`
	Rows    int64  `json:"rows"`
	Evicted int64  `json:"evicted"`
}

// manifestName and partName are the files of version v.
func manifestName(v int64) string { return fmt.Sprintf("v%012d.manifest", v) }

// A part's name holds its writer's token, so that a writer that finds
// its version taken (ErrExists) overwrites no part of the one that took it.
func partName(v int64, k int, token string) string {
	return fmt.Sprintf("v%012d-%03d-%s.part", v, k, token)
}

var partFile = regexp.MustCompile(`^v([0-9]{12})-([0-9]{3})-([0-9a-f]{16})\.part$`)

// partOf returns the version and index of a part's file name.
func partOf(name string) (v int64, k int, ok bool) {
	m := partFile.FindStringSubmatch(name)
	if m == nil {
		return 0, 0, false
	}
	v, _ = strconv.ParseInt(m[1], 10, 64)
	k, _ = strconv.Atoi(m[2])
	return v, k, true
}

var manifestFile = regexp.MustCompile(`^v([0-9]{12})\.manifest$`)

// DecodeManifest decodes and checks the manifest of version v: its
// version, and parts of distinct tables in files of that version.
func DecodeManifest(b []byte, v int64) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("changes: manifest of version %d: %v: %w", v, err, ErrCorrupt)
	}
	if m.Version != v {
		return nil, fmt.Errorf("changes: manifest of version %d says version %d: %w", v, m.Version, ErrCorrupt)
	}
	seen := map[string]bool{}
	for k, p := range m.Parts {
		switch {
		case !partIs(p.File, v, k):
			return nil, fmt.Errorf("changes: manifest of version %d names part %d %q, not a name of its part %d: %w", v, k, p.File, k, ErrCorrupt)
		case p.Table == "" || seen[p.Table]:
			return nil, fmt.Errorf("changes: manifest of version %d: part %d of table %q, empty or twice: %w", v, k, p.Table, ErrCorrupt)
		case p.Bytes < 0 || p.Rows < 0 || p.Evicted < 0:
			return nil, fmt.Errorf("changes: manifest of version %d: part %d has negative counts: %w", v, k, ErrCorrupt)
		}
		seen[p.Table] = true
	}
	return &m, nil
}

// partIs says whether name is a name of part k of version v.
func partIs(name string, v int64, k int) bool {
	pv, pk, ok := partOf(name)
	return ok && pv == v && pk == k
}

// versions returns the versions of the manifests in dir, oldest first.
func versions(dir string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("changes: read %s: %w", dir, err)
	}
	var vs []int64
	for _, e := range ents {
		if m := manifestFile.FindStringSubmatch(e.Name()); m != nil {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			vs = append(vs, v)
		}
	}
	slices.Sort(vs)
	return vs, nil
}

// readManifest reads and decodes version v's manifest in dir.
func readManifest(dir string, v int64) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, manifestName(v)))
	if err != nil {
		return nil, fmt.Errorf("changes: version %d: %w", v, err)
	}
	return DecodeManifest(b, v)
}
