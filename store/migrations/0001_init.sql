-- 0001_init: the first schema of arizukod's store. Times are unix milliseconds.

CREATE TABLE groups (
    folder           TEXT PRIMARY KEY,
    parent           TEXT REFERENCES groups (folder),
    name             TEXT NOT NULL DEFAULT '',
    description      TEXT NOT NULL DEFAULT '',
    container_config TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(container_config)),
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    CHECK (parent IS NULL OR parent <> folder)
);
CREATE INDEX groups_parent ON groups (parent);

CREATE TABLE runs (
    id                TEXT PRIMARY KEY,
    seq               INTEGER NOT NULL UNIQUE,
    folder            TEXT NOT NULL,
    kind              TEXT NOT NULL CHECK (kind IN ('turn', 'task')),
    task_id           TEXT,
    container         TEXT NOT NULL DEFAULT '',
    state             TEXT NOT NULL CHECK (state IN ('queued', 'running', 'exited', 'error', 'killed')),
    status            TEXT NOT NULL DEFAULT '' CHECK (status IN ('', 'ok', 'error', 'fatal')),
    failure           TEXT NOT NULL DEFAULT '',
    terminal          INTEGER NOT NULL DEFAULT 0 CHECK (terminal IN (0, 1)),
    exit_code         INTEGER,
    error             TEXT NOT NULL DEFAULT '',
    result            TEXT NOT NULL DEFAULT '',
    new_session_id    TEXT NOT NULL DEFAULT '',
    input             TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(input)),
    timeout_ms        INTEGER NOT NULL DEFAULT 0 CHECK (timeout_ms >= 0),
    attempt           INTEGER NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    inbox_first       INTEGER,
    inbox_last        INTEGER,
    kill_requested_at INTEGER,
    created_at        INTEGER NOT NULL,
    started_at        INTEGER,
    ended_at          INTEGER,
    CHECK ((kind = 'task') = (task_id IS NOT NULL)),
    CHECK ((inbox_first IS NULL) = (inbox_last IS NULL)),
    CHECK (inbox_first IS NULL OR inbox_first <= inbox_last)
);
CREATE INDEX runs_state_seq ON runs (state, seq);
CREATE INDEX runs_folder_seq ON runs (folder, seq);
CREATE INDEX runs_task_seq ON runs (task_id, seq) WHERE task_id IS NOT NULL;
-- The queue's per-folder invariant, enforced by the database as well as by StartNext.
CREATE UNIQUE INDEX runs_one_running_per_folder ON runs (folder) WHERE state = 'running';
-- At most one unfinished run over a folder's inbox: no message is ever in two open runs.
CREATE UNIQUE INDEX runs_one_open_inbox_run_per_folder ON runs (folder)
    WHERE inbox_last IS NOT NULL AND state IN ('queued', 'running');

CREATE TABLE session_log (
    id      INTEGER PRIMARY KEY,
    run_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    ts      INTEGER NOT NULL,
    level   TEXT NOT NULL CHECK (level IN ('debug', 'info', 'warn', 'error')),
    message TEXT NOT NULL
);
CREATE INDEX session_log_run ON session_log (run_id, id);

CREATE TABLE sessions (
    folder     TEXT PRIMARY KEY,
    session_id TEXT NOT NULL CHECK (session_id <> ''),
    updated_at INTEGER NOT NULL
);

CREATE TABLE inbox (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    folder     TEXT NOT NULL,
    sender_jid TEXT NOT NULL DEFAULT '',
    role       TEXT NOT NULL CHECK (role <> ''),
    content    TEXT NOT NULL,
    source     TEXT NOT NULL CHECK (source IN ('api', 'route', 'inject', 'delegate', 'task')),
    created_at INTEGER NOT NULL
);
CREATE INDEX inbox_folder_id ON inbox (folder, id);

CREATE TABLE cursors (
    folder          TEXT PRIMARY KEY,
    last_done_id    INTEGER NOT NULL DEFAULT 0,
    retries         INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT NOT NULL DEFAULT '',
    next_attempt_at INTEGER NOT NULL DEFAULT 0,
    parked_reason   TEXT NOT NULL DEFAULT '',
    parked_at       INTEGER,
    updated_at      INTEGER NOT NULL
);

CREATE TABLE outbox (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    folder     TEXT NOT NULL,
    run_id     TEXT REFERENCES runs (id) ON DELETE SET NULL,
    kind       TEXT NOT NULL CHECK (kind IN ('message', 'reply', 'document')),
    target     TEXT NOT NULL DEFAULT '',
    content    TEXT NOT NULL DEFAULT '',
    doc_path   TEXT,
    doc_name   TEXT,
    created_at INTEGER NOT NULL,
    CHECK ((kind = 'document') = (doc_path IS NOT NULL))
);
CREATE INDEX outbox_folder_id ON outbox (folder, id);

-- A row in grant_sets means the folder's rules were set (possibly to none);
-- no row means they never were and the caller applies its defaults.
CREATE TABLE grant_sets (
    folder     TEXT PRIMARY KEY,
    updated_at INTEGER NOT NULL
);
CREATE TABLE grants (
    folder TEXT NOT NULL REFERENCES grant_sets (folder) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,
    rule   TEXT NOT NULL CHECK (rule <> ''),
    PRIMARY KEY (folder, seq)
);

CREATE TABLE routes (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    seq        INTEGER NOT NULL,
    match      TEXT NOT NULL,
    target     TEXT NOT NULL CHECK (target <> ''),
    created_at INTEGER NOT NULL
);
CREATE INDEX routes_seq_id ON routes (seq, id);
CREATE INDEX routes_target ON routes (target);

CREATE TABLE tasks (
    id            TEXT PRIMARY KEY,
    folder        TEXT NOT NULL,
    prompt        TEXT NOT NULL,
    schedule_kind TEXT NOT NULL CHECK (schedule_kind IN ('cron', 'interval', 'once')),
    schedule_expr TEXT NOT NULL CHECK (schedule_expr <> ''),
    state         TEXT NOT NULL CHECK (state IN ('active', 'paused', 'completed')),
    next_run_at   INTEGER,
    last_run_at   INTEGER,
    last_run_id   TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX tasks_folder ON tasks (folder);
CREATE INDEX tasks_due ON tasks (next_run_at) WHERE state = 'active';
