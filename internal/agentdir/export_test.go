package agentdir

import "testing"

// WithoutOpenat2 makes the test walk with openat as where openat2 is missing or filtered.
func WithoutOpenat2(t *testing.T) {
	was := noOpenat2.Load()
	noOpenat2.Store(true)
	t.Cleanup(func() { noOpenat2.Store(was) })
}
