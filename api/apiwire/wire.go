// Package apiwire is the wire of arizukod's API: the JSON bodies of its requests and
// answers, and the Client that speaks it over the unix socket. It is a leaf: it imports
// nothing of arizukod but the agent contract's message, so gateways, the CLI's client
// commands, delivery and bench link neither the server nor the queue behind it. The
// server (package api) validates what it decodes into these types; nothing here does.
package apiwire

import (
	"encoding/json"
	"reflect"
	"time"

	"github.com/arizuko/arizukod/contract"
)

// MaxBody bounds every request body.
const MaxBody = 1 << 20

// HealthReport is the body of GET /health.
type HealthReport struct {
	Status  string `json:"status"` // ok, or degraded while the engine is away or turns are refused (engine.limits)
	Version string `json:"version"`
	// Image is the agent image the daemon's turns run.
	Image   string       `json:"image,omitempty"`
	Engine  EngineHealth `json:"engine"`
	Model   ModelHealth  `json:"model"`
	Running int          `json:"running"`
	Queued  int          `json:"queued"`
}

// EngineHealth is the engine part of HealthReport.
type EngineHealth struct {
	Up      bool   `json:"up"`
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	Socket  string `json:"socket,omitempty"`
	Error   string `json:"error,omitempty"`
	// Limits says whether the memory, CPU and pids limits hold: "applied", "not applied"
	// with the reason when the operator allowed that (allow_unlimited), or, while turns
	// are refused for it (status degraded), the reason and the fix; LimitsPending while
	// the engine answers but its details are still being asked.
	Limits string `json:"limits,omitempty"`
}

// ModelHealth is what the daemon's model gateway runs with. No credential does not make
// the status degraded (turns that never ask for the model run), but every turn that asks
// for it fails at its first request.
type ModelHealth struct {
	Upstream string `json:"upstream,omitempty"`
	// Credential says where the credential comes from (never its value).
	Credential string `json:"credential,omitempty"`
	// Error says why no turn can reach the model, with the fix; "" when it can.
	Error string `json:"error,omitempty"`
}

// LimitsPending is EngineHealth.Limits between the engine's first answer to a ping and its
// details: the status is ok, and turns start once the details are known.
const LimitsPending = "pending"

// ErrorBody is every error answer's body: what went wrong and, for a bad field, which.
type ErrorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

// Duration accepts a Go duration string ("90s") or a number of milliseconds, and is
// written as a string.
type Duration time.Duration

var durationType = reflect.TypeFor[Duration]()

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string or a number of milliseconds. Anything else is a
// *json.UnmarshalTypeError, which the decoder completes with the field's name.
func (d *Duration) UnmarshalJSON(b []byte) error {
	bad := &json.UnmarshalTypeError{Value: string(b[:min(len(b), 40)]), Type: durationType}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return bad
		}
		*d = Duration(v)
		return nil
	}
	var ms int64
	if err := json.Unmarshal(b, &ms); err != nil {
		return bad
	}
	*d = Duration(time.Duration(ms) * time.Millisecond)
	return nil
}

// GroupRemoval is the body of GET /v1/groups/{folder}/removal (what removing the group
// would do, removing nothing) and of DELETE /v1/groups/{folder} (what removing it did).
// Effects says it in sentences, which `arizukod groups remove` prints.
type GroupRemoval struct {
	Folder  string `json:"folder"`
	Removed bool   `json:"removed"`
	// Blocked says why the group cannot be removed now ("" when it can): groups below it,
	// runs of it queued or running.
	Blocked     string   `json:"blocked,omitempty"`
	Descendants []string `json:"descendants"`
	OpenRuns    []string `json:"openRuns"`
	// EndedRuns stay in the store until retention prunes them.
	EndedRuns int `json:"endedRuns"`
	// DroppedMessages are its pending inbox messages: kept, marked dropped, given to no turn.
	DroppedMessages []int64 `json:"droppedMessages"`
	// DeletedRoutes target it or were added by it.
	DeletedRoutes []int64  `json:"deletedRoutes"`
	DeletedTasks  []string `json:"deletedTasks"`
	// PendingOutbox messages of it not delivered yet stay, and are delivered as usual.
	PendingOutbox int `json:"pendingOutbox"`
	// KeptDirs are its directories, which stay on disk untouched: they hold what its agent
	// wrote, and the daemon does not remove agent ground.
	KeptDirs []string `json:"keptDirs"`
	Effects  []string `json:"effects"`
}

// RemoveGroupRequest is the body of DELETE /v1/groups/{folder}: who removes it.
type RemoveGroupRequest struct {
	By string `json:"by"`
}

// Group is a group on the wire.
type Group struct {
	Folder          string          `json:"folder"`
	Parent          string          `json:"parent,omitempty"`
	Name            string          `json:"name,omitempty"`
	Description     string          `json:"description,omitempty"`
	Tier            int             `json:"tier"`
	ContainerConfig json.RawMessage `json:"containerConfig,omitempty"`
}

// PutGroupRequest is the body of POST /v1/groups.
type PutGroupRequest struct {
	Folder          string          `json:"folder"`
	Name            string          `json:"name"`
	Description     string          `json:"description"`
	ContainerConfig json.RawMessage `json:"containerConfig"`
}

// InboxRequest is the body of POST /v1/groups/{folder}/messages. SenderJID and ChatJID
// are the messages' sender and chat; a message's own senderJid or chatJid takes precedence.
type InboxRequest struct {
	Messages  []contract.Message `json:"messages"`
	SenderJID string             `json:"senderJid"`
	ChatJID   string             `json:"chatJid"`
}

// ProjectRequest is the body of PUT /v1/groups/{folder}/project.
type ProjectRequest struct {
	// Path is the git repository on the host: the top of its work tree, or a bare
	// repository, under a root of the mount allowlist.
	Path string `json:"path"`
}

// Project is a group's project: the repository its turns work on at Target, through its
// own branch.
type Project struct {
	Folder string `json:"folder"`
	Repo   string `json:"repo"`
	Branch string `json:"branch"`
	Target string `json:"target"`
	// Created says the request made the branch (rather than finding the group's own).
	Created bool `json:"created,omitempty"`
}

// GrantsRequest is the body of PUT /v1/groups/{folder}/grants.
type GrantsRequest struct {
	Rules []string `json:"rules"`
}

// OutboxItem is an outbox entry on the wire.
type OutboxItem struct {
	ID        int64  `json:"id"`
	RunID     string `json:"runId,omitempty"`
	Kind      string `json:"kind"`
	Target    string `json:"target,omitempty"`
	Content   string `json:"content,omitempty"`
	DocPath   string `json:"docPath,omitempty"`
	DocName   string `json:"docName,omitempty"`
	CreatedAt string `json:"createdAt"`
}

// DropRequest is the body of POST /v1/groups/{folder}/messages/{id}/drop: who drops it.
type DropRequest struct {
	By string `json:"by"`
}

// InboundMessage is the body of POST /v1/messages: a chat message for the routes.
type InboundMessage struct {
	Platform string `json:"platform"`
	Room     string `json:"room"`
	ChatJID  string `json:"chatJid"`
	Sender   string `json:"sender"`
	Verb     string `json:"verb"`
	Content  string `json:"content"`
}

// InboxMessage is a pending inbox message on the wire.
type InboxMessage struct {
	ID        int64  `json:"id"`
	SenderJID string `json:"senderJid,omitempty"`
	ChatJID   string `json:"chatJid,omitempty"`
	Role      string `json:"role"`
	Content   string `json:"content"`
	Source    string `json:"source"`
	CreatedAt string `json:"createdAt"`
}

// Inbox is the body of GET /v1/groups/{folder}/messages: the folder's cursor and the
// messages waiting past it (those of a turn still running included).
type Inbox struct {
	Folder        string         `json:"folder"`
	LastDoneID    int64          `json:"lastDoneId"`
	Retries       int            `json:"retries,omitempty"`
	LastError     string         `json:"lastError,omitempty"`
	NextAttemptAt string         `json:"nextAttemptAt,omitempty"`
	ParkedReason  string         `json:"parkedReason,omitempty"`
	ParkedAt      string         `json:"parkedAt,omitempty"`
	Pending       []InboxMessage `json:"pending"`
}

// MaxOutboxWait bounds GET /v1/outbox's wait.
const MaxOutboxWait = 60 * time.Second

// OutboxRow is a row of the outbox stream on the wire (GET /v1/outbox and friends).
type OutboxRow struct {
	ID          int64  `json:"id"`
	Folder      string `json:"folder"`
	RunID       string `json:"runId"`
	Kind        string `json:"kind"` // message, reply, document, result or notice
	Target      string `json:"target"`
	Platform    string `json:"platform"` // target's part before its first ':'
	Content     string `json:"content"`
	DocPath     string `json:"docPath"`
	DocName     string `json:"docName"`
	CreatedAt   int64  `json:"createdAt"` // unix ms
	State       string `json:"state"`     // pending, delivered or parked
	Attempts    int    `json:"attempts"`
	LeaseUntil  int64  `json:"leaseUntil"` // unix ms; 0 when not leased
	LastError   string `json:"lastError"`
	DeliveredAt int64  `json:"deliveredAt"` // unix ms; 0 until acked
}

// OutboxList is the body of GET /v1/outbox.
type OutboxList struct {
	// Lease is the token of the lease that handed the pending rows out: acknowledging or
	// failing them takes it (AckRequest.Lease, FailRequest.Lease), and only this answer
	// carries it. It is left out when no row was leased (a listing, or nothing pending).
	Lease string      `json:"lease,omitempty"`
	Items []OutboxRow `json:"items"`
}

// AckRequest is the body of POST /v1/outbox/ack.
type AckRequest struct {
	Lease string  `json:"lease"` // the token of the lease that handed the rows out
	IDs   []int64 `json:"ids"`
}

// AckResponse answers POST /v1/outbox/ack.
type AckResponse struct {
	Acked int `json:"acked"`
}

// FailRequest is the body of POST /v1/outbox/fail.
type FailRequest struct {
	Lease string `json:"lease"` // the token of the lease that handed the row out
	ID    int64  `json:"id"`
	Error string `json:"error"`
	// RetryAfter keeps the row from coming again for this long (default 0: at once).
	RetryAfter Duration `json:"retryAfter,omitempty"`
}

// Route is a route on the wire. Owner is empty for the operator's routes (the ones made
// here), else the group whose agent added it.
type Route struct {
	ID        int64  `json:"id"`
	Seq       int64  `json:"seq"`
	Match     string `json:"match"`
	Target    string `json:"target"`
	Owner     string `json:"owner,omitempty"`
	CreatedAt string `json:"createdAt"`
}

// AddRouteRequest is the body of POST /v1/routes: an operator's route, consulted before
// any group's (ipc/ROUTES.md). Match "" matches every message.
type AddRouteRequest struct {
	Seq    *int64  `json:"seq"`
	Match  *string `json:"match"`
	Target string  `json:"target"`
}

// Run is a run on the wire.
type Run struct {
	ID           string `json:"id"`
	Folder       string `json:"folder"`
	Kind         string `json:"kind"`
	TaskID       string `json:"taskId,omitempty"`
	Container    string `json:"container,omitempty"`
	State        string `json:"state"`
	Status       string `json:"status,omitempty"`
	Failure      string `json:"failure,omitempty"`
	Terminal     bool   `json:"terminal,omitempty"`
	ExitCode     *int   `json:"exitCode,omitempty"`
	Error        string `json:"error,omitempty"`
	Result       string `json:"result,omitempty"`
	NewSessionID string `json:"newSessionId,omitempty"`
	Attempt      int    `json:"attempt"`
	InboxFirst   int64  `json:"inboxFirst,omitempty"` // an inbox run answers the inbox messages InboxFirst..InboxLast
	InboxLast    int64  `json:"inboxLast,omitempty"`
	TimeoutMs    int64  `json:"timeoutMs,omitempty"`
	CreatedAt    string `json:"createdAt"`
	StartedAt    string `json:"startedAt,omitempty"`
	EndedAt      string `json:"endedAt,omitempty"`
	// Usage is what the turn used of the model API through the gateway.
	Usage *Usage `json:"usage,omitempty"`
	// Egress is what the turn moved through the egress proxy, per host (GET of one run).
	Egress []Egress `json:"egress,omitempty"`
	// Phases are how long the parts of the turn took (GET of one run that started).
	Phases *Phases `json:"phases,omitempty"`
}

// Phases are how long the parts of a run's turn took, in milliseconds: the wait in the
// queue once it started, the others once its turn is over (absent until then).
type Phases struct {
	QueueWaitMs int64 `json:"queueWaitMs"`
	// PrepareMs: the plan, directories, prompt, session, grants and the services.
	PrepareMs *int64 `json:"prepareMs,omitempty"`
	// SidecarsMs: of PrepareMs, starting the group's sidecars.
	SidecarsMs *int64 `json:"sidecarsMs,omitempty"`
	// CreateMs: until the container existed (or the prepared one was taken).
	CreateMs *int64 `json:"createMs,omitempty"`
	// StartMs: attaching, starting, until the input was written whole.
	StartMs *int64 `json:"startMs,omitempty"`
	// RunMs: the agent's run, until the runner had the result.
	RunMs *int64 `json:"runMs,omitempty"`
	// FinishMs: stopping the services.
	FinishMs *int64 `json:"finishMs,omitempty"`
}

// Usage is a run's model usage.
type Usage struct {
	Requests         int64  `json:"requests"`
	Model            string `json:"model,omitempty"`
	InputTokens      int64  `json:"inputTokens"`
	OutputTokens     int64  `json:"outputTokens"`
	CacheReadTokens  int64  `json:"cacheReadTokens"`
	CacheWriteTokens int64  `json:"cacheWriteTokens"`
	// CacheWrite1hTokens are those of CacheWriteTokens written to the 1-hour cache.
	CacheWrite1hTokens int64  `json:"cacheWrite1hTokens"`
	Refused            string `json:"refused,omitempty"`
	// UpstreamError is how the model upstream last failed during the run: what the agent
	// retried.
	UpstreamError string `json:"upstreamError,omitempty"`
}

// Egress is a run's traffic to one host:port through the egress proxy.
type Egress struct {
	Host      string `json:"host"`
	Requests  int64  `json:"requests"`
	BytesUp   int64  `json:"bytesUp"`
	BytesDown int64  `json:"bytesDown"`
	Refused   int64  `json:"refused"`
}

// CreateRunRequest is the body of POST /v1/runs. ChatJID is the chat the turn answers
// (where send_reply without a chat_jid goes); empty: the last message's chatJid, if any.
type CreateRunRequest struct {
	Folder    string             `json:"folder"`
	Messages  []contract.Message `json:"messages"`
	SessionID string             `json:"sessionId"`
	SenderJID string             `json:"senderJid"`
	ChatJID   string             `json:"chatJid,omitempty"`
	Timeout   *Duration          `json:"timeout,omitempty"`
}

// SteerRequest is the body of POST /v1/runs/{id}/steer.
type SteerRequest struct {
	Messages []contract.Message `json:"messages"`
}

// Task is a scheduled task on the wire. Schedule is the expression as the store keeps it
// (an interval in milliseconds).
type Task struct {
	ID           string `json:"id"`
	Folder       string `json:"folder"`
	Prompt       string `json:"prompt"`
	ScheduleKind string `json:"scheduleKind"`
	Schedule     string `json:"schedule"`
	State        string `json:"state"`
	NextRunAt    string `json:"nextRunAt,omitempty"`
	LastRunAt    string `json:"lastRunAt,omitempty"`
	LastRunID    string `json:"lastRunId,omitempty"`
	CreatedAt    string `json:"createdAt"`
	UpdatedAt    string `json:"updatedAt"`
}

// PruneRequest is the body of POST /v1/prune (an empty body: prune).
type PruneRequest struct {
	DryRun bool `json:"dryRun"`
}

// PruneReport answers POST /v1/prune: what was pruned (or, with DryRun, would be).
type PruneReport struct {
	DryRun   bool  `json:"dryRun"`
	Runs     int64 `json:"runs"`
	Inbox    int64 `json:"inbox"`
	Outbox   int64 `json:"outbox"`
	Logs     int   `json:"logs"`
	LogBytes int64 `json:"logBytes"`
	// The database's size before and after compaction; a dry run does not compact.
	DBBytesBefore int64 `json:"dbBytesBefore"`
	DBBytesAfter  int64 `json:"dbBytesAfter"`
	Vacuumed      bool  `json:"vacuumed"`
	// LogErrors are the groups whose logs could not be pruned, with why; the rest went on.
	LogErrors []string `json:"logErrors,omitempty"`
}

// BackupContentType is the media type of POST /v1/backup's answer: an SQLite database.
const BackupContentType = "application/vnd.sqlite3"

// WarmAgent is one warm agent of GET /v1/warm: a folder's next agent, its container
// started and the agent waiting for the turn.
type WarmAgent struct {
	Folder    string `json:"folder"`
	Container string `json:"container"`
	// Ready is when it was ready, RFC 3339 (UTC).
	Ready string `json:"ready"`
	// PSSBytes is the proportional set size of its container's processes; 0 when the
	// daemon cannot read it.
	PSSBytes int64 `json:"pssBytes"`
}

// WarmAgents is the answer of GET /v1/warm.
type WarmAgents struct {
	// Max is warm_agents, MinAvailable warm_min_available (bytes), Available the host's
	// MemAvailable now (0: unknown).
	Max          int         `json:"max"`
	MinAvailable int64       `json:"minAvailable"`
	Available    int64       `json:"available"`
	Agents       []WarmAgent `json:"agents"`
}
