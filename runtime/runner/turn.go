package runner

import (
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/runtime/engine"
)

// CloseSentinel is the file written into the group's IPC input directory at the soft deadline.
const CloseSentinel = "_close"

// Failure says why a turn did not produce a usable answer, so the caller can act on it.
type Failure string

// Failures a Result can carry; empty means the agent answered.
const (
	FailNone      Failure = ""
	FailTimeout   Failure = "timeout"
	FailOOM       Failure = "oom"
	FailMisconfig Failure = "misconfig" // create failure, exit 125/126/127, missing image: terminal
	FailNoOutput  Failure = "no-output"
	FailBadOutput Failure = "bad-output"
	FailKilled    Failure = "killed"
	FailEngine    Failure = "engine"
	// FailModel: the model gateway gave the turn up, its upstream failing for [model]
	// give_up; a later attempt may reach it.
	FailModel Failure = "model"
	// FailLost: the container of an adopted run was gone, and its result with it.
	FailLost Failure = "lost"
	// FailDetached: the run was left running on purpose; it is not over.
	FailDetached Failure = "detached"
	// FailNoInput: the agent never got its input and gave no ok or error answer, so nothing
	// it did can depend on the turn: the input line was not written whole to its stdin (the
	// container ended first, or the daemon that ran it stopped before), or the container
	// never started. The turn may run again.
	FailNoInput Failure = "no-input"
)

// Turn is one request to run the agent.
type Turn struct {
	RunID  string
	Folder groupfolder.Folder
	// TaskID names a scheduled task's container arizuko-<folder>-task-<id>-<unix_ms>.
	TaskID string
	Input  contract.Input
	Limits engine.Limits
	// ProjectMounts show the group's project (package project), parents first.
	ProjectMounts []engine.Mount
	// ExtraMounts are additional mounts, already validated against the allowlist.
	ExtraMounts []engine.Mount
	// Timeout overrides Config.Timeout when positive.
	Timeout time.Duration
	// Env is more of the container's environment (KEY=VALUE); it cannot replace the
	// variables the runner sets.
	Env []string
	// ContainerEnv, when set, mints the variables of one container by its name, such as
	// its model token: a container prepared ahead gets them before any run is its.
	ContainerEnv func(name string) []string
	// Warm says that the turn's agent may be a warm agent, started ahead with the turn's
	// prepare line (warm.go): its folder has nothing that must not run before its turn
	// (sidecars). Only an image that declares contract.PrepareLabel gets one.
	Warm bool
	// WarmKey is what else a warm agent depends on that neither the spec nor the prepare
	// line shows (a digest of its seeded home): a turn with another does not use it.
	WarmKey string
	// Hold, when set on a Turn handed to Prepare, starts what a warm agent of the turn
	// connects to at its start (the MCP server, held until its turn binds it); release is
	// called once no warm agent made from it waits anymore: it was removed, or a turn took
	// it. Prepare calls it only for a warm agent, while no turn of the folder runs.
	Hold func() (release func(), err error)
	// OnCreated, when set, learns the container's name and id before it starts.
	OnCreated func(name, id string)
	// OnInput, when set, is called once the whole input line is written to the container's
	// stdin, so that a daemon adopting the run later knows the agent may have acted on it.
	OnInput func()
	// InputSent tells Adopt that the daemon that started the container wrote its input
	// whole (OnInput was called); without it, an adopted turn whose agent gave no ok or
	// error answer ends FailNoInput.
	InputSent bool
	// OnStderr, when set, gets each line the container prints on stderr.
	OnStderr func(line string)
	// Detach, when closed, makes Run return at once and leave the container running, for
	// a daemon that stops gracefully; Adopt collects the result later.
	Detach <-chan struct{}
}

// Result is how a turn ended.
type Result struct {
	RunID     string
	Container string
	Output    contract.Output
	ExitCode  int
	Failure   Failure
	// Terminal marks failures that a retry will not fix.
	Terminal    bool
	Duration    time.Duration
	StdoutBytes int64
	Stderr      string // the last bytes of stderr, redacted
	LogFile     string
}

// containerEnv is what t.ContainerEnv mints for the container name.
func (t Turn) containerEnv(name string) []string {
	if t.ContainerEnv == nil {
		return nil
	}
	return t.ContainerEnv(name)
}
