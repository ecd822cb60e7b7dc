-- Delivery state of the outbox (GET /v1/outbox, POST /v1/outbox/ack, the webhooks): each row
-- is pending until a consumer acknowledges it (delivered) or it fails max_attempts times
-- (parked, with the reason in last_error). A consumer leases rows: lease_until (unix ms) hides
-- a handed-out row from other leases until it passes. platform is the target's part before
-- its first ':' (tg:-100 -> tg), kept for the stream's filter. Two more kinds: "result" (the
-- final answer of an inbox turn) and "notice" (a short note to the chat: the folder parked, a
-- budget reached). The kind CHECK can only change by rebuilding the table.
--
-- Rows written before this migration count as delivered: until now the only way out was the
-- per-folder history (GET /v1/groups/{folder}/outbox), so a gateway that reads the new stream
-- must not get a backlog of old messages sent again.
CREATE TABLE outbox_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    folder       TEXT NOT NULL,
    run_id       TEXT REFERENCES runs (id) ON DELETE SET NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('message', 'reply', 'document', 'result', 'notice')),
    target       TEXT NOT NULL DEFAULT '',
    content      TEXT NOT NULL DEFAULT '',
    doc_path     TEXT,
    doc_name     TEXT,
    created_at   INTEGER NOT NULL,
    platform     TEXT NOT NULL DEFAULT '',
    state        TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'parked')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    lease_until  INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT NOT NULL DEFAULT '',
    delivered_at INTEGER,
    CHECK ((kind = 'document') = (doc_path IS NOT NULL))
);
INSERT INTO outbox_new (id, folder, run_id, kind, target, content, doc_path, doc_name, created_at,
    platform, state, delivered_at)
SELECT id, folder, run_id, kind, target, content, doc_path, doc_name, created_at,
    CASE WHEN instr(target, ':') > 0 THEN substr(target, 1, instr(target, ':') - 1) ELSE '' END,
    'delivered', created_at
FROM outbox;
DROP TABLE outbox;
ALTER TABLE outbox_new RENAME TO outbox;
CREATE INDEX outbox_folder_id ON outbox (folder, id);
-- The stream: pending rows in id order, and per chat (a chat's rows go out in order).
CREATE INDEX outbox_state_id ON outbox (state, id);
CREATE INDEX outbox_pending_target ON outbox (target, id) WHERE state = 'pending';
