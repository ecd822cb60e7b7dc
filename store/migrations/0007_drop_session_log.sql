-- The session log was never written: a run's lines live in its run-log file and in
-- journald (ARIZUKO_RUN_ID), its outcome in runs. Its index goes with it.
DROP TABLE session_log;
