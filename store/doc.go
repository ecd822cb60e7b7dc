// Package store owns all of arizukod's durable state: one SQLite database
// (modernc.org/sqlite, no cgo) with its schema, embedded migrations
// (migrations/NNNN_name.sql) and typed, transactional methods over it: runs and
// the run queue, groups, agent sessions, group inboxes and
// their cursors, the outbox, grant rules, routes and scheduled tasks.
//
// The store is deliberately dumb. It validates only what it stores (required
// fields, enumerations, JSON well-formedness) and performs atomic state
// transitions; it keeps rule, route-match, schedule and container-config
// strings verbatim and never interprets them; the one filter it applies is the
// caller's redaction of free text (WithRedact). It must not touch the file
// system beyond its database file, talk to a container engine or the network,
// or import groupfolder, ipc, mountsec or runtime: folders are plain strings
// here.
//
// One *Store serves the whole daemon from many goroutines. Every write that
// must be atomic runs in a BEGIN IMMEDIATE transaction, which serializes
// writers up front (no deadlocking lock upgrades), while WAL mode lets
// readers proceed. See README.md for the schema.
package store
