package daemon

import (
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/metrics"
	"github.com/arizuko/arizukod/pricing"
)

// costMetrics counts what each model response of a group's turns cost in met.
func costMetrics(met *metrics.Metrics) func(groupfolder.Folder, string, pricing.Cost) {
	return func(f groupfolder.Folder, model string, c pricing.Cost) {
		met.ModelCost(string(f), model, int64(c.Micros), c.Known())
	}
}
