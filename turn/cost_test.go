package turn

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/pricing"
)

// TestCostUnpricedLoggedOnce: a response of a model with no price costs "unknown" (the
// model named, nothing counted), never zero, and the log hears of each such model once
// for the daemon, however many turns and responses use it; tokens of none cost nothing.
func TestCostUnpricedLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	m := &ModelGateway{prices: pricing.Defaults(), unpriced: &sync.Map{}}
	for range 3 {
		c := m.cost(gateway.Usage{Model: "claude-mystery", InputTokens: 10}, log)
		if c.Known() || c.Micros != 0 || strings.Join(c.Unpriced, ",") != "claude-mystery" {
			t.Errorf("cost of an unpriced model: %+v", c)
		}
	}
	if c := m.cost(gateway.Usage{Model: "claude-sonnet-4-5", InputTokens: 1e6, CacheReadTokens: 1e6}, log); !c.Known() || c.Micros != 3_300_000 {
		t.Errorf("cost of claude-sonnet-4-5: %+v", c)
	}
	if c := m.cost(gateway.Usage{Model: "claude-other"}, log); !c.Known() || c.Micros != 0 {
		t.Errorf("no tokens: %+v", c)
	}
	if n := strings.Count(buf.String(), "has no price"); n != 1 || !strings.Contains(buf.String(), "model=claude-mystery") {
		t.Errorf("logged %d times:\n%s", n, buf.String())
	}
}
