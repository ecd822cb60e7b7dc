-- How the model upstream last failed during a run (unreachable, no answer in time, a 5xx
-- answer), recorded by the model gateway as it fails: what the agent is retrying, for
-- `arizukod run` and `chat` to show while the run runs. '' when it never failed.
ALTER TABLE runs ADD COLUMN model_error TEXT NOT NULL DEFAULT '';

-- An inbox message the operator dropped (`arizukod inbox drop`): kept, with who dropped
-- it and when (unix ms), and given to no turn.
ALTER TABLE inbox ADD COLUMN dropped_at INTEGER;
ALTER TABLE inbox ADD COLUMN dropped_by TEXT NOT NULL DEFAULT '';
