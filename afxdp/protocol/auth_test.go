package protocol_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp/protocol"
)

var benchTicket = protocol.Ticket{ID: 42, Secret: [protocol.SecretLen]byte{7, 7, 7}}

func TestTicketString(t *testing.T) {
	tk := protocol.NewTicket()
	got, err := protocol.ParseTicket(tk.String())
	if err != nil || got != tk {
		t.Fatalf("parsed %v, %v; want the ticket back", got.ID, err)
	}
	for _, bad := range []string{"", "zz", tk.String()[2:], "00000000000000000000" + tk.String()[20:]} {
		if _, err := protocol.ParseTicket(bad); err == nil {
			t.Errorf("ParseTicket(%q) took it", bad)
		}
	}
	if a, b := protocol.NewTicket(), protocol.NewTicket(); a == b {
		t.Fatal("two new tickets are the same")
	}
}

// TestVerifyOpen checks what makes an OPEN authentic: its ticket's name,
// a MAC under the secret over the session id and datagram size, and a
// clock within OpenSkew.
func TestVerifyOpen(t *testing.T) {
	r := protocol.NewKeyring(benchTicket)
	now := time.Unix(1_800_000_000, 0)
	h := protocol.PacketHeader{Type: protocol.TypeOpen, Session: 9, Offset: 1472, Length: protocol.OpenAuthLen}
	good := r.SealOpen(9, 1472, now.UnixNano())
	if ts, err := r.VerifyOpen(&h, good, now); err != nil || ts != now.UnixNano() {
		t.Fatalf("genuine OPEN: %v", err)
	}
	other := protocol.NewKeyring(protocol.Ticket{ID: benchTicket.ID, Secret: [protocol.SecretLen]byte{8}})
	tests := []struct {
		name string
		h    protocol.PacketHeader
		data []byte
		now  time.Time
		want error
	}{
		{"no authentication", h, nil, now, protocol.ErrUnauthentic},
		{"other secret", h, other.SealOpen(9, 1472, now.UnixNano()), now, protocol.ErrUnauthentic},
		{"other session", protocol.PacketHeader{Type: protocol.TypeOpen, Session: 10, Offset: 1472}, good, now, protocol.ErrUnauthentic},
		{"other size", protocol.PacketHeader{Type: protocol.TypeOpen, Session: 9, Offset: 9000}, good, now, protocol.ErrUnauthentic},
		{"other ticket", h, protocol.NewKeyring(protocol.Ticket{ID: 43}).SealOpen(9, 1472, now.UnixNano()), now, protocol.ErrUnauthentic},
		{"stale", h, good, now.Add(protocol.OpenSkew + time.Second), protocol.ErrReplayed},
		{"from the future", h, good, now.Add(-protocol.OpenSkew - time.Second), protocol.ErrReplayed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := r.VerifyOpen(&tt.h, tt.data, tt.now); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	for i := range good {
		bad := append([]byte(nil), good...)
		bad[i] ^= 0x10
		if _, err := r.VerifyOpen(&h, bad, now); err == nil {
			t.Fatalf("OPEN with byte %d changed taken", i)
		}
	}
}

// TestTokens: each direction of a session has its own token, which
// differs between sessions and between the clocks of their OPENs.
func TestTokens(t *testing.T) {
	r := protocol.NewKeyring(benchTicket)
	d, l := r.Tokens(1, 100)
	seen := map[uint64]bool{d: true, l: true}
	for _, x := range [][2]int64{{2, 100}, {1, 101}} {
		d2, l2 := r.Tokens(uint64(x[0]), x[1])
		if seen[d2] || seen[l2] {
			t.Fatalf("session %d at %d shares a token", x[0], x[1])
		}
		seen[d2], seen[l2] = true, true
	}
	if len(seen) != 6 {
		t.Fatal("tokens repeat")
	}
	if d3, l3 := r.Tokens(1, 100); d3 != d || l3 != l {
		t.Fatal("tokens are not a function of the session")
	}
}

func TestReplay(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	r := protocol.NewReplay(2)
	ts := now.UnixNano()
	if !r.Take(1, 1, ts, now) || r.Take(1, 1, ts, now) {
		t.Fatal("the same OPEN taken twice")
	}
	if !r.Take(2, 1, ts, now) {
		t.Fatal("another ticket's session refused")
	}
	if r.Take(1, 3, ts, now) {
		t.Fatal("taken past the bound with nothing expired")
	}
	later := now.Add(protocol.OpenSkew + time.Second)
	if !r.Take(1, 3, later.UnixNano(), later) || r.Len() != 1 {
		t.Fatalf("expired OPENs not dropped to make room: %d held", r.Len())
	}
	r.Forget(1)
	if r.Len() != 0 {
		t.Fatal("Forget kept the ticket's OPENs")
	}
}

// BenchmarkAuthentic is the per-packet cost of authentication on the
// receive path: decoding the header (which reads the token) and checking
// the token, for a packet that passes and one that fails.
//
//	go test ./afxdp/protocol -run '^$' -bench 'Authentic|Open' -benchmem
func BenchmarkAuthentic(b *testing.B) {
	env := protocol.NewEnv(protocol.Config{Window: 64}, nil, 1500, time.Now().UnixNano())
	s := protocol.NewSession(env, protocol.Key{ID: 5}, nil)
	r := protocol.NewKeyring(benchTicket)
	d, l := r.Tokens(5, 1)
	s.Authenticate(l, d, nil)
	for _, c := range []struct {
		name  string
		token uint64
	}{{"pass", d}, {"fail", d ^ 1}} {
		pkt := make([]byte, protocol.HeaderLen+1400)
		protocol.PutHeader(pkt, &protocol.PacketHeader{Type: protocol.TypeData, Flags: protocol.FlagFirst, Session: 5, Length: 1400, Token: c.token})
		b.Run("decode+check/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				h, _, err := protocol.DecodeHeader(pkt)
				if err == nil && s.Authentic(&h) {
					n++
				}
			}
			if (n > 0) != (c.name == "pass") {
				b.Fatalf("%d of %d packets authentic", n, b.N)
			}
		})
	}
	h, _, _ := protocol.DecodeHeader(make([]byte, protocol.HeaderLen))
	b.Run("check", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if s.Authentic(&h) {
				n++
			}
		}
		_ = n
	})
}

// BenchmarkOpen is the cost of an OPEN to the listener: checking a forged
// one's MAC (a known ticket name), and sealing one (the dialer's, and the
// tokens, once per session).
func BenchmarkOpen(b *testing.B) {
	r := protocol.NewKeyring(benchTicket)
	now := time.Now()
	h := protocol.PacketHeader{Type: protocol.TypeOpen, Session: 9, Offset: 1472, Length: protocol.OpenAuthLen}
	forged := protocol.NewKeyring(protocol.Ticket{ID: benchTicket.ID}).SealOpen(9, 1472, now.UnixNano())
	b.Run("verify-forged", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.VerifyOpen(&h, forged, now); err == nil {
				b.Fatal("forged OPEN taken")
			}
		}
	})
	good := r.SealOpen(9, 1472, now.UnixNano())
	b.Run("verify+tokens", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ts, err := r.VerifyOpen(&h, good, now)
			if err != nil {
				b.Fatal(err)
			}
			r.Tokens(9, ts)
		}
	})
}

// BenchmarkDataMAC is what authenticating every packet's data would cost
// instead of a token: HMAC-SHA256 over a full packet's data (1500-byte
// MTU), the alternative auth.go rejects.
func BenchmarkDataMAC(b *testing.B) {
	mac := hmac.New(sha256.New, benchTicket.Secret[:])
	data := make([]byte, 1500-28-protocol.HeaderLen)
	var sum [sha256.Size]byte
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		mac.Reset()
		mac.Write(data)
		mac.Sum(sum[:0])
	}
}
