-- What a run's turn used of the model API through the gateway, and why the gateway
-- refused a request (a budget reached, a model not allowed), if it did.
ALTER TABLE runs ADD COLUMN model_requests     INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN model              TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN input_tokens       INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN output_tokens      INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cache_read_tokens  INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN model_refused      TEXT NOT NULL DEFAULT '';
-- Bytes a run's turn moved through the egress proxy, per host:port.
CREATE TABLE run_egress (
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    host       TEXT NOT NULL,
    requests   INTEGER NOT NULL DEFAULT 0,
    bytes_up   INTEGER NOT NULL DEFAULT 0,
    bytes_down INTEGER NOT NULL DEFAULT 0,
    refused    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, host)
);
