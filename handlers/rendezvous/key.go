package rendezvous

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrBadKey is wrapped by errors from ParseKey and ParseDevice.
var ErrBadKey = errors.New("rendezvous: malformed key")

// FrameIter names a control-flow frame and iteration; graphs without loops
// use the zero value, written "0:0".
type FrameIter struct {
	FrameID, IterID uint64
}

// A ParsedKey is a rendezvous key taken apart.
type ParsedKey struct {
	SrcDevice      string
	SrcIncarnation uint64
	DstDevice      string
	EdgeName       string
	FrameIter      FrameIter
	// Src and Dst are the parsed device names.
	Src, Dst DeviceName
}

// CreateKey returns TensorFlow's rendezvous key for a tensor sent from src to
// dst: "src;incarnation;dst;name;frame:iter", the incarnation as 16 hex
// digits.
func CreateKey(src string, srcIncarnation uint64, dst, name string, fi FrameIter) string {
	var b strings.Builder
	b.Grow(len(src) + len(dst) + len(name) + 24)
	b.WriteString(src)
	b.WriteByte(';')
	var hex [16]byte
	const digits = "0123456789abcdef"
	for i := range hex {
		hex[15-i] = digits[(srcIncarnation>>(4*i))&0xf]
	}
	b.Write(hex[:])
	b.WriteByte(';')
	b.WriteString(dst)
	b.WriteByte(';')
	b.WriteString(name)
	b.WriteByte(';')
	b.WriteString(strconv.FormatUint(fi.FrameID, 10))
	b.WriteByte(':')
	b.WriteString(strconv.FormatUint(fi.IterID, 10))
	return b.String()
}

// ParseKey takes a rendezvous key apart, checking both device names.
func ParseKey(key string) (ParsedKey, error) {
	var p ParsedKey
	parts := strings.Split(key, ";")
	if len(parts) != 5 {
		return p, fmt.Errorf("%w: %q has %d fields, want 5", ErrBadKey, key, len(parts))
	}
	var err error
	if p.Src, err = ParseDevice(parts[0]); err != nil {
		return p, fmt.Errorf("%w: %q: source: %v", ErrBadKey, key, err)
	}
	if p.Dst, err = ParseDevice(parts[2]); err != nil {
		return p, fmt.Errorf("%w: %q: destination: %v", ErrBadKey, key, err)
	}
	if p.SrcIncarnation, err = strconv.ParseUint(parts[1], 16, 64); err != nil || parts[1] == "" {
		return p, fmt.Errorf("%w: %q: incarnation %q is not hex", ErrBadKey, key, parts[1])
	}
	if parts[3] == "" {
		return p, fmt.Errorf("%w: %q: empty tensor name", ErrBadKey, key)
	}
	frame, iter, ok := strings.Cut(parts[4], ":")
	if !ok {
		return p, fmt.Errorf("%w: %q: frame %q is not frame:iter", ErrBadKey, key, parts[4])
	}
	if p.FrameIter.FrameID, err = strconv.ParseUint(frame, 10, 64); err != nil {
		return p, fmt.Errorf("%w: %q: frame id %q", ErrBadKey, key, frame)
	}
	if p.FrameIter.IterID, err = strconv.ParseUint(iter, 10, 64); err != nil {
		return p, fmt.Errorf("%w: %q: iteration %q", ErrBadKey, key, iter)
	}
	p.SrcDevice, p.DstDevice, p.EdgeName = parts[0], parts[2], parts[3]
	return p, nil
}

// A DeviceName is a fully specified device name taken apart:
// "/job:ps/replica:0/task:1/device:CPU:0".
type DeviceName struct {
	Job     string
	Replica int
	Task    int
	Type    string // "CPU"
	ID      int
}

// TaskName returns the name of the device's task, "/job:ps/replica:0/task:1".
func (d DeviceName) TaskName() string {
	return "/job:" + d.Job + "/replica:" + strconv.Itoa(d.Replica) + "/task:" + strconv.Itoa(d.Task)
}

// String returns the canonical name, "/job:ps/replica:0/task:1/device:CPU:0".
func (d DeviceName) String() string {
	return d.TaskName() + "/device:" + d.Type + ":" + strconv.Itoa(d.ID)
}

// ParseDevice parses a fully specified device name, in the current
// "/device:CPU:0" form or the legacy "/cpu:0" one.
func ParseDevice(name string) (DeviceName, error) {
	var d DeviceName
	if !strings.HasPrefix(name, "/") {
		return d, fmt.Errorf("%w: device %q does not start with /", ErrBadKey, name)
	}
	var haveJob, haveReplica, haveTask, haveDevice bool
	for _, part := range strings.Split(name[1:], "/") {
		field, val, _ := strings.Cut(part, ":")
		var err error
		switch field {
		case "job":
			d.Job, haveJob = val, val != ""
		case "replica":
			d.Replica, err = strconv.Atoi(val)
			haveReplica = true
		case "task":
			d.Task, err = strconv.Atoi(val)
			haveTask = true
		case "device":
			typ, id, ok := strings.Cut(val, ":")
			if !ok || typ == "" {
				return d, fmt.Errorf("%w: device %q: bad device part %q", ErrBadKey, name, part)
			}
			d.Type = typ
			d.ID, err = strconv.Atoi(id)
			haveDevice = true
		case "cpu", "CPU", "gpu", "GPU":
			d.Type = strings.ToUpper(field)
			d.ID, err = strconv.Atoi(val)
			haveDevice = true
		default:
			return d, fmt.Errorf("%w: device %q: unknown part %q", ErrBadKey, name, part)
		}
		if err != nil || d.Replica < 0 || d.Task < 0 || d.ID < 0 {
			return d, fmt.Errorf("%w: device %q: bad number in %q", ErrBadKey, name, part)
		}
	}
	if !haveJob || !haveReplica || !haveTask || !haveDevice {
		return d, fmt.Errorf("%w: device %q is not fully specified", ErrBadKey, name)
	}
	return d, nil
}
