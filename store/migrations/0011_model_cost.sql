-- Of a run's cache writes, those to the 1-hour cache (priced above the 5-minute ones).
ALTER TABLE runs ADD COLUMN cache_write_1h_tokens INTEGER NOT NULL DEFAULT 0;
-- What the model gateway saw each group's turns use, per model and quarter hour (the
-- unix ms its quarter hour starts at, so that a day or month in any time zone is a range
-- of them): what money is counted and budgeted from. Kept apart from runs, so that
-- pruning old runs does not change what a month cost.
CREATE TABLE model_usage (
    folder             TEXT NOT NULL,
    model              TEXT NOT NULL,
    bucket             INTEGER NOT NULL,
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    -- Of cache_write_tokens, those written to the 1-hour cache (priced above the 5-minute).
    cache_write_1h_tokens INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (folder, bucket, model)
);
CREATE INDEX model_usage_bucket ON model_usage (bucket);
-- The budget notices sent: one per budget (its folder and period, "day" or "month"),
-- period start (unix ms) and threshold (percent), so that each is sent once.
CREATE TABLE budget_notices (
    folder       TEXT NOT NULL,
    period       TEXT NOT NULL,
    period_start INTEGER NOT NULL,
    percent      INTEGER NOT NULL,
    sent_at      INTEGER NOT NULL,
    PRIMARY KEY (folder, period, period_start, percent)
);
