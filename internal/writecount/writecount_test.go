package writecount

import "testing"

func TestCountsOnlyWhenEnabled(t *testing.T) {
	Add(7)
	if w, f := Read(); w != 0 || f != 0 {
		t.Fatalf("before Enable: %d writes, %d frames counted", w, f)
	}
	Enable()
	Add(3)
	Add(5)
	if w, f := Read(); w != 2 || f != 8 {
		t.Fatalf("after Enable: %d writes, %d frames, want 2 and 8", w, f)
	}
}

func TestAddAllocatesNothing(t *testing.T) {
	Enable()
	if n := testing.AllocsPerRun(100, func() { Add(1) }); n != 0 {
		t.Fatalf("Add allocates %v times", n)
	}
}
