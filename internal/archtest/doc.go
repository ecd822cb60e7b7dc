// Package archtest pins the import graph to ARCHITECTURE.md: its test reads the table of
// what each room may not import and fails on a forbidden import, naming the edge, and on
// a package the table of rooms does not name. It holds no code of its own.
package archtest
