// Package project owns a group's project (seed 003's project_access): the git repository
// an operator gave the group, the group's own repository under <data>/projects/<slug>/
// that its turns work in, the mounts that show it at /workspace/project, and taking the
// group's branch, arizuko/<folder>, into the operator's repository after each turn.
//
// # Design
//
// The agent never gets a writable window into the operator's repository. Its turns see
//
//   - /workspace/project: the group's working tree with its own .git directory (read-write),
//     a repository of its own holding only what the agent wrote;
//   - /workspace/project/.git/config and .git/objects/info/alternates: files of the daemon,
//     bound read-only over the agent's (no hooks path, no fsmonitor, no filter a host git
//     would run; the alternates name the next mount);
//   - /var/lib/arizuko/project-objects: the repository's objects directory, read-only,
//     through which the agent reads the whole history without copying it.
//
// The binds keep the agent's own git honest, not the host's: the agent can move its .git
// away, binds and all, and make another. So its commits land in its own repository on its
// branch, and when the turn is over (the container gone, so nothing of the agent runs), the
// daemon rewrites the two files of its own in the group's .git (only when they differ, so
// that a container prepared ahead keeps its binds on the files there), refuses a .git
// holding a link, a special file, a commondir or a .git of its own, and fetches exactly
// refs/heads/arizuko/<folder> into the operator's repository, fast-forward only, every
// object checked (fetch.fsckObjects), no hook run.
// The fetch runs git upload-pack in the group's repository, which git documents as safe
// for a repository it does not trust. So the agent cannot move another branch, change the
// repository's config or hooks, or delete an object of it; the operator merges the branch
// when they like (`git log arizuko/<folder>`, `git merge arizuko/<folder>`).
//
// A linked worktree with the common directory read-only and binds for what `git commit`
// writes was the other way: it needs objects/ writable (the agent could then unlink the
// operator's objects and packs) and the directory of its ref writable (for a folder
// main/research that is refs/heads/arizuko/main/, every sibling group's branch).
//
// git runs on the host as a command with a clean environment: no system config
// (GIT_CONFIG_NOSYSTEM), the daemon user's own global config (where safe.directory names
// a repository of another user), core.hooksPath=/dev/null and core.fsmonitor=false.
//
// It reads and writes the store's project rows and runs git; it must not touch engines,
// the queue or the agent's group directory.
package project
