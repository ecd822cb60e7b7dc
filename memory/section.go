package memory

// MaxSectionText bounds the text of one Section, in bytes after escaping.
const MaxSectionText = 16 << 10

// Section renders a block of the system prompt that is not memory, such as the group's
// grants: <tag name="value"...>, the text escaped as the layers' text is (so nothing in it
// can close the block or forge another), cut at MaxSectionText bytes with the truncation
// marker, and </tag>. attrs are name, value pairs. tag and the attribute names are the
// caller's constants.
func Section(tag string, attrs []string, text string) string {
	out := append([]byte("<"), tag...)
	for i := 0; i+1 < len(attrs); i += 2 {
		out = appendAttr(out, attrs[i], attrs[i+1])
	}
	out = append(out, ">\n"...)
	body := len(out)
	out, used := appendEscaped(out, text, MaxSectionText, false)
	if len(out) > body && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	if used < len(text) {
		out = appendMarker(out, int64(len(text)-used))
		out = append(out, '\n')
	}
	out = append(out, "</"...)
	out = append(out, tag...)
	return string(append(out, ">\n"...))
}
