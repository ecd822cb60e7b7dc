package memory

import (
	"errors"
	"fmt"
)

// ErrInvalidJID is wrapped by EncodeJID when a JID cannot be mapped to a users/
// file name.
var ErrInvalidJID = errors.New("invalid JID")

// maxUserStem is the longest encoded JID: a file name is at most 255 bytes and
// ".md" takes three of them.
const maxUserStem = 255 - len(".md")

const upperHex = "0123456789ABCDEF"

// plainByte reports whether c stands for itself in an encoded JID. Everything
// else, uppercase letters included (so names cannot collide on a
// case-insensitive filesystem), is written as %XX.
func plainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// EncodeJID returns the file name stem of a sender's user file: the file is
// users/<EncodeJID(jid)>.md. Every byte outside [a-z0-9._-] is written as '%'
// followed by two uppercase hex digits, so "telegram:123" becomes
// "telegram%3A123" and "matrix:@a/b" becomes "matrix%3A%40a%2Fb". The mapping is
// reversible (its tests decode it back) and the result never contains '/' or '%' other than as
// an escape, so it names a file directly inside users/. Empty JIDs, JIDs whose
// encoding is "." or "..", and encodings longer than 252 bytes are rejected.
func EncodeJID(jid string) (string, error) {
	if jid == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalidJID)
	}
	n := len(jid)
	for i := 0; i < len(jid); i++ {
		if !plainByte(jid[i]) {
			n += 2
		}
	}
	if n > maxUserStem {
		return "", fmt.Errorf("%w %q: encoded name is %d bytes, the limit is %d", ErrInvalidJID, jid, n, maxUserStem)
	}
	b := make([]byte, 0, n)
	for i := 0; i < len(jid); i++ {
		c := jid[i]
		if plainByte(c) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', upperHex[c>>4], upperHex[c&0xf])
	}
	stem := string(b)
	if stem == "." || stem == ".." {
		return "", fmt.Errorf("%w %q: encodes to %q", ErrInvalidJID, jid, stem)
	}
	return stem, nil
}
