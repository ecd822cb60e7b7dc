-- How long the parts of a run's last turn took (JSON of store.Phases, milliseconds),
-- recorded when the turn is over, for `arizukod runs show`: '' until then.
ALTER TABLE runs ADD COLUMN phases TEXT NOT NULL DEFAULT '';
