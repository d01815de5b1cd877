package protocol

import (
	"errors"
	"testing"
)

func TestCountPacked(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want int // -1: malformed
	}{
		{"one", []byte{3, 0, 'a', 'b', 'c'}, 1},
		{"two", []byte{1, 0, 'a', 2, 0, 'b', 'c'}, 2},
		{"empty", nil, -1},
		{"zero length", []byte{0, 0, 1, 0, 'a'}, -1},
		{"length past the end", []byte{4, 0, 'a', 'b', 'c'}, -1},
		{"half a length", []byte{1, 0, 'a', 9}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := countPacked(tt.data)
			if tt.want < 0 {
				if !errors.Is(err, ErrProtocol) {
					t.Fatalf("got %d, %v; want ErrProtocol", n, err)
				}
				return
			}
			if err != nil || n != tt.want {
				t.Fatalf("got %d, %v; want %d", n, err, tt.want)
			}
		})
	}
}
