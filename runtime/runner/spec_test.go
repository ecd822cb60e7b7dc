package runner_test

import (
	"testing"
	"time"

	"github.com/arizuko/arizukod/runtime/runner"
)

func TestQueryTimeout(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{20 * time.Minute, 20*time.Minute - 30*time.Second},
		{61 * time.Second, 31 * time.Second},
		{8 * time.Second, 6 * time.Second},
	} {
		if got := runner.QueryTimeout(c.in); got != c.want {
			t.Errorf("QueryTimeout(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}
