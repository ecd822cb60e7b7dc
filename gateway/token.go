package gateway

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/arizuko/arizukod/internal/atomicfile"
)

// Tokens mints the per-turn model tokens. A token is a MAC of the agent container's name
// under a host secret, so a restarted daemon recognises the token of a turn it adopts,
// and no token says anything about another.
type Tokens struct{ secret []byte }

// OpenTokens reads the secret at path, creating it (0600, 32 random bytes) when missing.
func OpenTokens(path string) (*Tokens, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		data = make([]byte, 32)
		rand.Read(data)
		if err := atomicfile.Write(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("model token secret: %w", err)
		}
		return &Tokens{secret: data}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("model token secret: %w", err)
	}
	if len(data) < 32 {
		return nil, fmt.Errorf("model token secret %s: shorter than 32 bytes; remove it and a new one is made", path)
	}
	return &Tokens{secret: data}, nil
}

// Token is the token of an agent container, by its name: each attempt of a run has a
// container (and a name) of its own, and a container prepared ahead of its turn gets its
// token before any run is its.
func (t *Tokens) Token(container string) string {
	mac := hmac.New(sha256.New, t.secret)
	mac.Write([]byte("container/" + container))
	return "arz-" + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}
