// Package archtest holds the checks of the module as a whole. It pins the import graph to
// ARCHITECTURE.md: its test reads the table of what each room may not import and fails on
// a forbidden package a room reaches, directly or through other packages, naming the chain
// of imports; on a package the table has no row for or the table of rooms does not name;
// it fails when code outside package contract spells the container's IPC directory or a
// socket's name; on a test file that reaches a real part of the test host without being
// named *_e2e_test.go; and when `go mod tidy` would change go.mod or go.sum. It holds no
// code of its own.
package archtest
