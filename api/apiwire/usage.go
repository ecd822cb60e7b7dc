package apiwire

// Cost is an amount of money in US dollars: Micros exactly, in millionths of a dollar,
// and USD written for people ("$1.25"). Unpriced names the models whose tokens have no
// price ([prices] in arizukod.toml): then the cost is unknown, at least Micros.
type Cost struct {
	Micros   int64    `json:"micros"`
	USD      string   `json:"usd"`
	Unpriced []string `json:"unpriced,omitempty"`
}

// GroupUsage is what one group's turns cost (Today, Month, Since: its own) and what its
// whole subtree's did (the group and every group below it).
type GroupUsage struct {
	Folder       string `json:"folder"`
	Today        Cost   `json:"today"`
	Month        Cost   `json:"month"`
	Since        Cost   `json:"since"`
	SubtreeToday Cost   `json:"subtreeToday"`
	SubtreeMonth Cost   `json:"subtreeMonth"`
	SubtreeSince Cost   `json:"subtreeSince"`
}

// ModelUsage is the tokens of one model since the report's Since and what they cost;
// Cost is null when the model has no price.
type ModelUsage struct {
	Model            string `json:"model"`
	InputTokens      int64  `json:"inputTokens"`
	OutputTokens     int64  `json:"outputTokens"`
	CacheReadTokens  int64  `json:"cacheReadTokens"`
	CacheWriteTokens int64  `json:"cacheWriteTokens"`
	// CacheWrite1hTokens are those of CacheWriteTokens written to the 1-hour cache.
	CacheWrite1hTokens int64 `json:"cacheWrite1hTokens"`
	Cost               *Cost `json:"cost"`
}

// UsageReport is the answer of GET /v1/usage?folder=F&since=D: the cost of the model
// usage of Folder's subtree ("" for every group), today and this month in the daemon's
// time zone and since Since, per group and per model. Tokens the model gateway never saw
// cost nothing.
type UsageReport struct {
	Folder string `json:"folder"`
	// Since is the start of the report's range, RFC 3339; Today and Month are the starts
	// of the day and the month.
	Since string `json:"since"`
	Today string `json:"today"`
	Month string `json:"month"`
	// PricesAsOf is the date of the price table.
	PricesAsOf string `json:"pricesAsOf"`
	// Total is what the subtree cost since Since; Groups are its groups with usage (and
	// their ancestors in it), by folder; Models its usage since Since, by model.
	Total  Cost         `json:"total"`
	Groups []GroupUsage `json:"groups"`
	Models []ModelUsage `json:"models"`
}

// Price is a model's price per million tokens of each kind: CacheWrite of the 5-minute
// cache, CacheWrite1h of the 1-hour one.
type Price struct {
	Model        string `json:"model"`
	Input        Cost   `json:"input"`
	Output       Cost   `json:"output"`
	CacheRead    Cost   `json:"cacheRead"`
	CacheWrite   Cost   `json:"cacheWrite"`
	CacheWrite1h Cost   `json:"cacheWrite1h"`
}

// Prices is the answer of GET /v1/prices: the daemon's price table, by model.
type Prices struct {
	AsOf   string  `json:"asOf"`
	Source string  `json:"source"`
	Prices []Price `json:"prices"`
}
