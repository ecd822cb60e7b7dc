package memory

import (
	"errors"
	"strings"
	"testing"
)

func TestEncodeJID(t *testing.T) {
	for _, tc := range []struct {
		jid, want string
	}{
		{"telegram:123456", "telegram%3A123456"},
		{"matrix:@alice:example.org", "matrix%3A%40alice%3Aexample.org"},
		{"matrix:@a/b", "matrix%3A%40a%2Fb"},
		{"whatsapp:Bob/1", "whatsapp%3A%42ob%2F1"},
		{"100%", "100%25"},
		{"a b", "a%20b"},
		{"...", "..."},
		{".x", ".x"},
		{"../../etc/passwd", "..%2F..%2Fetc%2Fpasswd"},
		{"\x00\xff", "%00%FF"},
		{"日", "%E6%97%A5"},
	} {
		got, err := EncodeJID(tc.jid)
		if err != nil || got != tc.want {
			t.Errorf("EncodeJID(%q) = %q, %v; want %q", tc.jid, got, err, tc.want)
			continue
		}
		back, err := DecodeJID(got)
		if err != nil || back != tc.jid {
			t.Errorf("DecodeJID(%q) = %q, %v; want %q", got, back, err, tc.jid)
		}
	}
	for _, jid := range []string{"", ".", "..", strings.Repeat("a", 253), strings.Repeat(":", 85)} {
		if got, err := EncodeJID(jid); !errors.Is(err, ErrInvalidJID) {
			t.Errorf("EncodeJID(%q) = %q, %v; want ErrInvalidJID", jid, got, err)
		}
	}
	if _, err := EncodeJID(strings.Repeat("a", 252)); err != nil {
		t.Errorf("252-byte JID: %v", err)
	}
}

func TestDecodeJIDRejectsNonCanonical(t *testing.T) {
	for _, stem := range []string{"", ".", "..", "a%3a", "%61", "a:b", "A", "a%", "a%3", "a%zz", "a/b", strings.Repeat("a", 253)} {
		if got, err := DecodeJID(stem); !errors.Is(err, ErrInvalidJID) {
			t.Errorf("DecodeJID(%q) = %q, %v; want ErrInvalidJID", stem, got, err)
		}
	}
}

func FuzzJID(f *testing.F) {
	for _, s := range []string{"telegram:1", "matrix:@a/b", "..", "%", "A", "a%3A"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if stem, err := EncodeJID(s); err == nil {
			if strings.ContainsAny(stem, "/\x00") || stem == "." || stem == ".." || len(stem) > maxUserStem {
				t.Fatalf("EncodeJID(%q) = %q: not a safe file name", s, stem)
			}
			back, err := DecodeJID(stem)
			if err != nil || back != s {
				t.Fatalf("round trip %q -> %q -> %q, %v", s, stem, back, err)
			}
		}
		if jid, err := DecodeJID(s); err == nil {
			stem, err := EncodeJID(jid)
			if err != nil || stem != s {
				t.Fatalf("DecodeJID(%q) = %q, encodes back to %q, %v", s, jid, stem, err)
			}
		}
	})
}
