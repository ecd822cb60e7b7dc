package memory

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxFrontmatter is the most bytes read from the start of a file looking for
// the end of its frontmatter.
const maxFrontmatter = 64 << 10

var (
	errNoFrontmatter   = errors.New("no frontmatter: the first line is not ---")
	errOpenFrontmatter = errors.New("frontmatter not closed by a --- line")
)

// meta is what the prompt uses from a frontmatter block.
type meta struct {
	summary string // whitespace runs folded to one space; "" when absent or null
	date    string // as written; "" when absent or null
}

// readMeta reads the frontmatter at the start of r, at most maxFrontmatter
// bytes, and returns its summary and date. buf is scratch space, returned
// (possibly grown) for reuse.
func readMeta(r io.Reader, buf []byte) (meta, []byte, error) {
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			if cap(buf) >= maxFrontmatter {
				return meta{}, buf, fmt.Errorf("%w within %d bytes", errOpenFrontmatter, maxFrontmatter)
			}
			grown := make([]byte, len(buf), min(max(2*cap(buf), 4096), maxFrontmatter))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		body, done, serr := splitFrontmatter(buf)
		switch {
		case serr != nil:
			return meta{}, buf, serr
		case done:
			m, perr := parseMeta(body)
			return m, buf, perr
		case errors.Is(err, io.EOF):
			return meta{}, buf, errOpenFrontmatter
		case err != nil:
			return meta{}, buf, err
		}
	}
}

// splitFrontmatter looks at the first bytes of a file. The first line (after
// an optional UTF-8 byte order mark) must be "---"; the block ends at the next
// line that is "---" or "...". Trailing blanks and '\r' are ignored on both
// delimiter lines. done is false while the data read so far does not hold the
// end of the block.
func splitFrontmatter(data []byte) (body []byte, done bool, err error) {
	const bom = "\xEF\xBB\xBF"
	if len(data) < len(bom) && strings.HasPrefix(bom, string(data)) {
		return nil, false, nil
	}
	data = bytes.TrimPrefix(data, []byte(bom))
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 {
		// The first line is not complete yet: it may still become "---".
		if len(data) < 3 && !strings.HasPrefix("---", string(data)) ||
			len(data) >= 3 && (string(data[:3]) != "---" || len(bytes.Trim(data[3:], " \t\r")) > 0) {
			return nil, false, errNoFrontmatter
		}
		return nil, false, nil
	}
	if string(bytes.TrimRight(data[:nl], " \t\r")) != "---" {
		return nil, false, errNoFrontmatter
	}
	start := nl + 1
	for pos := start; pos < len(data); {
		end := bytes.IndexByte(data[pos:], '\n')
		if end < 0 {
			return nil, false, nil
		}
		line := string(bytes.TrimRight(data[pos:pos+end], " \t\r"))
		if line == "---" || line == "..." {
			return data[start:pos], true, nil
		}
		pos += end + 1
	}
	return nil, false, nil
}

// parseMeta parses a frontmatter body with a real YAML parser (quotes, block
// scalars, anchors) and picks summary and date. Both must be scalars when
// present.
func parseMeta(body []byte) (meta, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(body, &doc); err != nil {
		return meta{}, fmt.Errorf("frontmatter YAML: %w", err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return meta{}, nil
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return meta{}, errors.New("frontmatter is not a YAML mapping")
	}
	var m meta
	seen := map[string]bool{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		key := top.Content[i].Value
		if key != "summary" && key != "date" || seen[key] {
			continue
		}
		seen[key] = true
		v, err := scalar(top.Content[i+1])
		if err != nil {
			return meta{}, fmt.Errorf("frontmatter %s: %w", key, err)
		}
		if key == "summary" {
			m.summary = strings.Join(strings.Fields(v), " ")
		} else {
			m.date = strings.TrimSpace(v)
		}
	}
	return m, nil
}

// scalar returns the string value of a scalar node ("" for null), following
// one alias.
func scalar(n *yaml.Node) (string, error) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.ScalarNode {
		return "", errors.New("not a string")
	}
	if n.Tag == "!!null" {
		return "", nil
	}
	return n.Value, nil
}
