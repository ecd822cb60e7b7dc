-- When a run's input line reached its container's stdin (NULL: not yet, or never): a run
-- adopted after a daemon stopped, whose agent gave no answer, runs again only if its input
-- never reached the agent. Runs running while this migration applies count as delivered.
ALTER TABLE runs ADD COLUMN input_sent_at INTEGER;
UPDATE runs SET input_sent_at = started_at WHERE state = 'running';
-- Set when the folder's session is cleared (clear_session) while the run runs: the session
-- id the same turn answers with is then recorded on the run but not made the folder's.
ALTER TABLE runs ADD COLUMN session_cleared INTEGER NOT NULL DEFAULT 0 CHECK (session_cleared IN (0, 1));
