package rendezvous

import (
	"errors"
	"testing"
)

func TestCreateKey(t *testing.T) {
	got := CreateKey("/job:ps/replica:0/task:0/device:CPU:0", 0x1234abcd, "/job:worker/replica:0/task:1/device:CPU:0", "w/read:0", FrameIter{})
	want := "/job:ps/replica:0/task:0/device:CPU:0;000000001234abcd;/job:worker/replica:0/task:1/device:CPU:0;w/read:0;0:0"
	if got != want {
		t.Fatalf("CreateKey = %q, want %q", got, want)
	}
}

func TestParseKey(t *testing.T) {
	const ps = "/job:ps/replica:0/task:0/device:CPU:0"
	const wk = "/job:worker/replica:0/task:3/device:CPU:0"
	tests := []struct {
		name, key string
		want      ParsedKey
		err       bool
	}{
		{name: "basic", key: ps + ";00000000000000ff;" + wk + ";edge_5_w;0:0",
			want: ParsedKey{SrcDevice: ps, SrcIncarnation: 0xff, DstDevice: wk, EdgeName: "edge_5_w",
				Src: DeviceName{Job: "ps", Type: "CPU"}, Dst: DeviceName{Job: "worker", Task: 3, Type: "CPU"}}},
		{name: "frame", key: ps + ";ffffffffffffffff;" + wk + ";x:1;7:42",
			want: ParsedKey{SrcDevice: ps, SrcIncarnation: ^uint64(0), DstDevice: wk, EdgeName: "x:1", FrameIter: FrameIter{7, 42},
				Src: DeviceName{Job: "ps", Type: "CPU"}, Dst: DeviceName{Job: "worker", Task: 3, Type: "CPU"}}},
		{name: "legacy device", key: "/job:ps/replica:0/task:2/cpu:0;1;" + wk + ";t;0:0",
			want: ParsedKey{SrcDevice: "/job:ps/replica:0/task:2/cpu:0", SrcIncarnation: 1, DstDevice: wk, EdgeName: "t",
				Src: DeviceName{Job: "ps", Task: 2, Type: "CPU"}, Dst: DeviceName{Job: "worker", Task: 3, Type: "CPU"}}},
		{name: "four fields", key: ps + ";1;" + wk + ";0:0", err: true},
		{name: "six fields", key: ps + ";1;" + wk + ";a;b;0:0", err: true},
		{name: "empty name", key: ps + ";1;" + wk + ";;0:0", err: true},
		{name: "bad incarnation", key: ps + ";xyz;" + wk + ";a;0:0", err: true},
		{name: "empty incarnation", key: ps + ";;" + wk + ";a;0:0", err: true},
		{name: "bad frame", key: ps + ";1;" + wk + ";a;0", err: true},
		{name: "bad iter", key: ps + ";1;" + wk + ";a;0:x", err: true},
		{name: "partial source", key: "/job:ps;1;" + wk + ";a;0:0", err: true},
		{name: "relative destination", key: ps + ";1;job:worker;a;0:0", err: true},
		{name: "unknown device part", key: ps + ";1;/job:w/replica:0/task:0/tpu_system:0;a;0:0", err: true},
		{name: "empty", key: "", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKey(tt.key)
			if tt.err {
				if !errors.Is(err, ErrBadKey) {
					t.Fatalf("ParseKey(%q) = %+v, %v; want ErrBadKey", tt.key, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseKey(%q): %v", tt.key, err)
			}
			if got != tt.want {
				t.Fatalf("ParseKey(%q) = %+v, want %+v", tt.key, got, tt.want)
			}
		})
	}
}

func TestKeyRoundTrip(t *testing.T) {
	for _, inc := range []uint64{0, 1, 0xdeadbeef, ^uint64(0)} {
		src, dst := "/job:ps/replica:0/task:1/device:CPU:0", "/job:worker/replica:0/task:0/device:CPU:0"
		key := CreateKey(src, inc, dst, "grad/_3", FrameIter{1, 2})
		p, err := ParseKey(key)
		if err != nil {
			t.Fatal(err)
		}
		if p.SrcDevice != src || p.DstDevice != dst || p.SrcIncarnation != inc || p.EdgeName != "grad/_3" || p.FrameIter != (FrameIter{1, 2}) {
			t.Fatalf("round trip of %q gave %+v", key, p)
		}
		if p.Src.String() != src || p.Src.TaskName() != "/job:ps/replica:0/task:1" {
			t.Fatalf("device %+v prints as %q", p.Src, p.Src.String())
		}
	}
}

func FuzzParseKey(f *testing.F) {
	f.Add(CreateKey("/job:ps/replica:0/task:0/device:CPU:0", 7, "/job:worker/replica:0/task:0/device:CPU:0", "a", FrameIter{}))
	f.Add("/job:ps/replica:0/task:2/cpu:0;1;/job:w/replica:0/task:0/device:CPU:0;t;0:0")
	f.Fuzz(func(t *testing.T, key string) {
		p, err := ParseKey(key)
		if err != nil {
			return
		}
		again := CreateKey(p.SrcDevice, p.SrcIncarnation, p.DstDevice, p.EdgeName, p.FrameIter)
		q, err := ParseKey(again)
		if err != nil || q != p {
			t.Fatalf("%q parsed as %+v, re-created as %q, parsed as %+v, %v", key, p, again, q, err)
		}
	})
}
