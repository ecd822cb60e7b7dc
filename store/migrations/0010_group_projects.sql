-- A group's project (`arizukod groups project set`): the git repository it works on,
-- through a branch of its own, arizuko/<folder>. One per group; gone with the group.
CREATE TABLE group_projects (
    folder     TEXT PRIMARY KEY REFERENCES groups (folder) ON DELETE CASCADE,
    repo       TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

-- The branches arizukod made in a repository for a folder: a branch of that name that is
-- not listed here was not made for the group, and is never taken over. Kept after the
-- project is cleared, so that giving the group the repository again continues its branch.
CREATE TABLE project_branches (
    repo       TEXT NOT NULL,
    branch     TEXT NOT NULL,
    folder     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (repo, branch)
);
