-- Placeholder: migration 10 is the worktree branch's (group projects); this file only
-- keeps the versions without a gap on the money branch until it is merged. The merge
-- takes the worktree branch's file.
SELECT 1;
