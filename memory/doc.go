// Package memory assembles the memory part of a turn's system prompt from the
// plain files under a group directory (groups/<folder>/ on the host, /workspace
// in the container): the diary, recent episodes, facts and the sender's user
// file, in that order, as <knowledge> blocks. README.md in this directory is the
// format reference for agent and skill authors.
//
// It owns the on-disk layout of those four layers, the JID to file name encoding
// of users/ (the literal JID first, then EncodeJID), the escaping that keeps file content from
// closing or forging a block, and the byte caps that keep the prompt (and so the
// turn's stdin line) bounded: the prompt is at most MaxTotalCap bytes and its JSON
// encoding at most MaxPromptJSON bytes.
//
// It is a pure library over the filesystem: it reads, never writes, and must not
// touch a container engine, the store or the network. Assemble reads the group
// directory through its descriptor (internal/agentdir) and follows no symlink, so a
// link planted by an agent cannot make it read anything outside its own files, and it opens files non-blocking and
// reads only regular files, so a FIFO cannot stall it. It reads only the
// directory listings (the diary's only when its window is not found by name)
// plus the files whose content it injects (see README.md for the one documented
// exception: episodes whose names carry no date, whose frontmatter it keeps in
// memory per version of the file, so each is read once).
package memory
