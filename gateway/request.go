package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// judgedKeys are the top-level keys of a request body whose values the gateway relies
// on. Each is read from its one exact key: encoding/json would take a case variant
// ("MODEL") or the last of two, while the upstream may read another, so a body with a
// duplicate or a case variant of one of them is refused.
var judgedKeys = []string{"model", "max_tokens", "stream"}

// Bounds of the judged values.
const (
	maxModelName = 256
	maxMaxTokens = 1 << 32
)

// request is what the gateway judges of a request body.
type request struct {
	Model string
	// MaxTokens is the request's max_tokens; 0 when it has none.
	MaxTokens int64
}

// fieldError is a request body the gateway refuses, naming the field.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

// judge reads the judged fields of a request body, refusing a body that is not a JSON
// object, a judged key that appears twice or in another case, and a judged value of the
// wrong type. It copies nothing of the body but the judged values.
func judge(body []byte) (request, error) {
	var req request
	if !json.Valid(body) {
		// Unmarshal checks the whole input before it decodes any of it: this is the error.
		err := json.Unmarshal(body, new(any))
		return req, fmt.Errorf("the request body is not JSON: %w", err)
	}
	seen := map[string]bool{}
	err := members(body, func(key string, value []byte) error {
		for _, name := range judgedKeys {
			switch {
			case key == name && seen[name]:
				return &fieldError{name, "the key appears twice in the request body; send it once"}
			case key == name:
				seen[name] = true
				return judgeValue(&req, name, value)
			case strings.EqualFold(key, name):
				return &fieldError{key, fmt.Sprintf("a case variant of %q; send %q once, as it is spelled", name, name)}
			}
		}
		return nil
	})
	return req, err
}

func judgeValue(req *request, name string, value []byte) error {
	switch name {
	case "model":
		if json.Unmarshal(value, &req.Model) != nil || len(req.Model) > maxModelName {
			return &fieldError{name, fmt.Sprintf("must be a string of at most %d bytes", maxModelName)}
		}
	case "max_tokens":
		if json.Unmarshal(value, &req.MaxTokens) != nil || req.MaxTokens < 1 || req.MaxTokens > maxMaxTokens {
			return &fieldError{name, fmt.Sprintf("must be an integer from 1 to %d", int64(maxMaxTokens))}
		}
	case "stream":
		var b bool
		if json.Unmarshal(value, &b) != nil {
			return &fieldError{name, "must be true or false"}
		}
	}
	return nil
}

var errNotObject = errors.New("the request body is not a JSON object")

// members calls fn with each member of the JSON object body, which is valid JSON: its
// key, decoded, and its raw value, in order. A key longer than any judged key can be
// written (six bytes an escaped character) is handed on undecoded, as it matches none.
func members(body []byte, fn func(key string, value []byte) error) error {
	i := skipSpace(body, 0)
	if i == len(body) || body[i] != '{' {
		return errNotObject
	}
	i = skipSpace(body, i+1)
	for i < len(body) && body[i] == '"' {
		end := stringEnd(body, i)
		raw := body[i:end]
		key := string(raw)
		switch {
		case len(raw) > 2+6*len("max_tokens"):
		case plain(raw):
			key = string(raw[1 : len(raw)-1])
		default:
			if err := json.Unmarshal(raw, &key); err != nil {
				return err
			}
		}
		i = skipSpace(body, skipSpace(body, end)+1) // past the colon
		vend := valueEnd(body, i)
		if err := fn(key, body[i:vend]); err != nil {
			return err
		}
		i = skipSpace(body, vend)
		if i < len(body) && body[i] == ',' {
			i = skipSpace(body, i+1)
		}
	}
	return nil
}

// plain says a quoted string is ASCII without escapes: its bytes are what it says.
func plain(quoted []byte) bool {
	for _, c := range quoted {
		if c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index past the string that starts at b[i].
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd is the index past the value that starts at b[i].
func valueEnd(b []byte, i int) int {
	if i == len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && !strings.ContainsRune(",}] \t\r\n", rune(b[j])) {
		j++
	}
	return j
}
