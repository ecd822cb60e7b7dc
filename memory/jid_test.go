package memory

import (
	"errors"
	"fmt"
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

// DecodeJID is the inverse of EncodeJID: it takes a users/ file name stem
// (without ".md") and returns the JID. Only canonical encodings are accepted
// (plain bytes unescaped, everything else as %XX with uppercase hex), so each JID
// has exactly one file name.
func DecodeJID(stem string) (string, error) {
	if stem == "" || stem == "." || stem == ".." {
		return "", fmt.Errorf("%w: file name stem %q", ErrInvalidJID, stem)
	}
	if len(stem) > maxUserStem {
		return "", fmt.Errorf("%w: file name stem is %d bytes, the limit is %d", ErrInvalidJID, len(stem), maxUserStem)
	}
	b := make([]byte, 0, len(stem))
	for i := 0; i < len(stem); i++ {
		c := stem[i]
		switch {
		case plainByte(c):
			b = append(b, c)
		case c == '%':
			if i+2 >= len(stem) {
				return "", fmt.Errorf("%w: file name stem %q: truncated escape at byte %d", ErrInvalidJID, stem, i)
			}
			hi, lo := unhex(stem[i+1]), unhex(stem[i+2])
			if hi < 0 || lo < 0 {
				return "", fmt.Errorf("%w: file name stem %q: bad escape %q at byte %d", ErrInvalidJID, stem, stem[i:i+3], i)
			}
			d := byte(hi<<4 | lo)
			if plainByte(d) {
				return "", fmt.Errorf("%w: file name stem %q: %q must not be escaped", ErrInvalidJID, stem, d)
			}
			b = append(b, d)
			i += 2
		default:
			return "", fmt.Errorf("%w: file name stem %q: byte %q at %d must be escaped", ErrInvalidJID, stem, c, i)
		}
	}
	return string(b), nil
}

// unhex returns the value of an uppercase hex digit, or -1.
func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
