// Package archtest holds the checks of the module as a whole. It pins the import graph to
// ARCHITECTURE.md: its test reads the table of what each room may not import and fails on
// a forbidden import, naming the edge, and on a package the table of rooms does not name;
// it fails on a test file that reaches a real part of the test host without being named
// *_e2e_test.go; and it fails when `go mod tidy` would change go.mod or go.sum. It holds
// no code of its own.
package archtest
