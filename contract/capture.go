package contract

import (
	"bytes"
	"errors"
	"fmt"
)

// DefaultMaxBlock bounds the output block kept from an agent's stdout.
const DefaultMaxBlock = 8 << 20

// maxMarkerLine bounds how much of one line outside the block is kept while looking for the
// start marker: a marker line is short, so anything longer is noise and is only counted.
const maxMarkerLine = 4 << 10

// ErrBlockTooBig says the agent printed more between the markers than Capture keeps.
var ErrBlockTooBig = errors.New("output block too big")

// Capture is an io.Writer for a container's stdout. It ignores every line until the start
// marker, keeps the lines up to the end marker and discards the rest, so its memory stays
// bounded however much the container prints. It is not safe for concurrent use.
type Capture struct {
	// MaxBlock bounds the kept block; zero means DefaultMaxBlock.
	MaxBlock int

	line      []byte // the current line outside the block, up to maxMarkerLine
	lineLong  bool
	inBlock   bool
	done      bool
	overflow  bool
	block     []byte
	lineStart int // offset in block where the current block line starts
	total     int64
}

// Write consumes stdout bytes. It never fails, so a flooding container cannot make the
// stream copy stop early and leave the container blocked on a full pipe.
func (c *Capture) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	rest := p
	for len(rest) > 0 && !c.done {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			c.add(rest)
			break
		}
		c.add(rest[:i])
		c.endLine()
		rest = rest[i+1:]
	}
	return len(p), nil
}

func (c *Capture) maxBlock() int {
	if c.MaxBlock > 0 {
		return c.MaxBlock
	}
	return DefaultMaxBlock
}

func (c *Capture) add(b []byte) {
	switch {
	case c.inBlock && !c.overflow:
		if len(c.block)+len(b) > c.maxBlock() {
			c.overflow = true
			return
		}
		c.block = append(c.block, b...)
	case c.inBlock:
	case c.lineLong || len(c.line)+len(b) > maxMarkerLine:
		c.lineLong = true
	default:
		c.line = append(c.line, b...)
	}
}

func (c *Capture) endLine() {
	if c.inBlock {
		if c.overflow {
			return
		}
		if isMarker(c.block[c.lineStart:], EndMarker) {
			c.block = c.block[:c.lineStart]
			c.inBlock, c.done = false, true
			return
		}
		c.add([]byte{'\n'})
		c.lineStart = len(c.block)
		return
	}
	if !c.lineLong && isMarker(c.line, StartMarker) {
		c.inBlock = true
	}
	c.line, c.lineLong = c.line[:0], false
}

func isMarker(line []byte, marker string) bool {
	return len(line) <= len(marker)+8 && string(bytes.TrimSpace(line)) == marker
}

// Total is the number of stdout bytes seen.
func (c *Capture) Total() int64 { return c.total }

// Result parses what was captured, once stdout has ended; an end marker on a last line
// without a newline counts. It names the reason when there is no usable answer: no start
// marker, no end marker, an oversized block, or a block that is not contract JSON.
func (c *Capture) Result() (Output, error) {
	if c.inBlock && !c.overflow && isMarker(c.block[c.lineStart:], EndMarker) {
		c.block = c.block[:c.lineStart]
		c.inBlock, c.done = false, true
	}
	switch {
	case c.overflow:
		return Output{}, fmt.Errorf("%w: more than %d bytes between the markers", ErrBlockTooBig, c.maxBlock())
	case !c.done && !c.inBlock:
		return Output{}, fmt.Errorf("%w (%d bytes of stdout seen)", ErrNoOutput, c.total)
	case !c.done:
		return Output{}, ErrUnterminated
	}
	return ParseOutput(c.block)
}
