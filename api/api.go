// Package api is the server of arizukod's local JSON API over a unix socket: runs, group
// inboxes, groups and their grants, the outbox and its delivery stream, the operator's routes
// and inbound chat messages. It validates every request and answers a caller's mistake with a
// 4xx and a JSON error that names the field; it writes to the store and wakes or asks the
// queue, and never touches an engine or a file. Its bodies and the client are package
// apiwire, which callers import instead of this one: only the daemon serves the API.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/exactjson"
	"github.com/arizuko/arizukod/pricing"
	"github.com/arizuko/arizukod/store"
)

// maxWait bounds a long poll.
const maxWait = 10 * time.Minute

// Queue is what the API asks of the queue.
type Queue interface {
	Wake()
	Kill(id string) bool
	Steer(ctx context.Context, id string, msgs []contract.Message) error
	// Ended returns a channel closed when run id's turn ends, and the func that gives it
	// back once the caller stops waiting.
	Ended(id string) (ended <-chan struct{}, release func())
}

// Health is what /health reports beyond the store.
type Health interface {
	Health(ctx context.Context) apiwire.HealthReport
}

// Server serves the API.
type Server struct {
	// Networks are the named networks a group's containerConfig.network may name
	// (limits.allowed_networks); set before serving.
	Networks []string
	// Runtimes are the OCI runtimes a group's containerConfig.runtime may name
	// (limits.allowed_runtimes); set before serving.
	Runtimes []string
	// Layout is where the groups' directories are, which removing a group names (zero:
	// they are named relative to the data dir).
	Layout groupfolder.Layout
	// Location is where cron schedules are read when a task resumes (nil: time.Local).
	Location *time.Location
	// Metrics serves GET /metrics; set before serving (nil: 404).
	Metrics http.Handler
	// Upkeep serves POST /v1/prune and POST /v1/backup; set before serving (nil: 404).
	Upkeep Upkeep
	// Projects serves /v1/groups/{folder}/project; set before serving (nil: 404).
	Projects Projects
	// Prices is the daemon's price table now, which GET /v1/usage prices usage with
	// (nil: the shipped one).
	Prices func() pricing.Table
	// Warm serves GET /v1/warm, the warm agents with their memory; set before serving
	// (nil: none).
	Warm func(ctx context.Context) apiwire.WarmAgents

	store  *store.Store
	queue  Queue
	health Health
	log    *slog.Logger
	mux    *http.ServeMux

	stopping chan struct{} // closed by Close: long polls of the outbox answer at once
	stopOnce sync.Once
	delivery atomic.Pointer[store.LeasePolicy] // SetDelivery
}

// SetDelivery sets how the outbox stream leases rows ([delivery] in arizukod.toml), at any
// time (a reload); zero fields, and a server never told, take DefaultVisibility and
// DefaultMaxAttempts.
func (s *Server) SetDelivery(p store.LeasePolicy) { s.delivery.Store(&p) }

// New returns the API over st and q.
func New(st *store.Store, q Queue, h Health, log *slog.Logger) *Server {
	s := &Server{store: st, stopping: make(chan struct{}), queue: q, health: h, log: log, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /health", s.getHealth)
	s.mux.HandleFunc("GET /metrics", s.getMetrics)
	s.mux.HandleFunc("POST /v1/runs", s.createRun)
	s.mux.HandleFunc("GET /v1/runs", s.listRuns)
	s.mux.HandleFunc("GET /v1/runs/{id}", s.getRun)
	s.mux.HandleFunc("DELETE /v1/runs/{id}", s.killRun)
	s.mux.HandleFunc("POST /v1/runs/{id}/steer", s.steerRun)
	s.mux.HandleFunc("POST /v1/groups", s.putGroup)
	s.mux.HandleFunc("GET /v1/groups", s.listGroups)
	s.mux.HandleFunc("GET /v1/groups/{folder}", s.getGroup)
	s.mux.HandleFunc("GET /v1/groups/{folder}/removal", s.planGroupRemoval)
	s.mux.HandleFunc("DELETE /v1/groups/{folder}", s.removeGroup)
	s.mux.HandleFunc("POST /v1/groups/{folder}/messages", s.appendInbox)
	s.mux.HandleFunc("GET /v1/groups/{folder}/messages", s.listInbox)
	s.mux.HandleFunc("PUT /v1/groups/{folder}/grants", s.putGrants)
	s.mux.HandleFunc("GET /v1/groups/{folder}/grants", s.getGrants)
	s.mux.HandleFunc("GET /v1/groups/{folder}/outbox", s.listOutbox)
	s.mux.HandleFunc("PUT /v1/groups/{folder}/project", s.putProject)
	s.mux.HandleFunc("GET /v1/groups/{folder}/project", s.getProject)
	s.mux.HandleFunc("DELETE /v1/groups/{folder}/project", s.deleteProject)
	s.mux.HandleFunc("POST /v1/groups/{folder}/unpark", s.unpark)
	s.mux.HandleFunc("POST /v1/groups/{folder}/messages/{id}/drop", s.dropInbox)
	s.mux.HandleFunc("GET /v1/outbox", s.streamOutbox)
	s.mux.HandleFunc("POST /v1/outbox/ack", s.ackOutbox)
	s.mux.HandleFunc("POST /v1/outbox/fail", s.failOutbox)
	s.mux.HandleFunc("GET /v1/outbox/{id}", s.getOutbox)
	s.mux.HandleFunc("POST /v1/outbox/{id}/retry", s.retryOutbox)
	s.mux.HandleFunc("POST /v1/messages", s.inbound)
	s.mux.HandleFunc("GET /v1/routes", s.listRoutes)
	s.mux.HandleFunc("POST /v1/routes", s.addRoute)
	s.mux.HandleFunc("DELETE /v1/routes/{id}", s.deleteRoute)
	s.mux.HandleFunc("GET /v1/tasks", s.listTasks)
	s.mux.HandleFunc("GET /v1/tasks/{id}", s.getTask)
	s.mux.HandleFunc("POST /v1/tasks/{id}/{verb}", s.taskVerb)
	s.mux.HandleFunc("POST /v1/prune", s.prune)
	s.mux.HandleFunc("POST /v1/backup", s.backup)
	s.mux.HandleFunc("GET /v1/usage", s.getUsage)
	s.mux.HandleFunc("GET /v1/prices", s.getPrices)
	s.mux.HandleFunc("GET /v1/warm", s.getWarm)
	return s
}

// ServeHTTP serves one request, turning a panic into a 500 that is logged.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("api handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
			writeErr(w, http.StatusInternalServerError, "", "internal error")
		}
	}()
	r.Body = http.MaxBytesReader(w, r.Body, apiwire.MaxBody)
	s.mux.ServeHTTP(w, r)
}

func writeErr(w http.ResponseWriter, code int, field, format string, args ...any) {
	writeJSON(w, code, apiwire.ErrorBody{Error: fmt.Sprintf(format, args...), Field: field})
}

// getWarm lists the warm agents with their memory.
func (s *Server) getWarm(w http.ResponseWriter, r *http.Request) {
	out := apiwire.WarmAgents{Agents: []apiwire.WarmAgent{}}
	if s.Warm != nil {
		out = s.Warm(r.Context())
		if out.Agents == nil {
			out.Agents = []apiwire.WarmAgent{}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// exactFields refuses a body (decoded already, so a JSON object) whose fields named in
// exact, matched without case as encoding/json matches them, hold a string that does not
// decode as sent.
func exactFields(w http.ResponseWriter, body []byte, exact []string) bool {
	var fields map[string]json.RawMessage
	if len(exact) == 0 || json.Unmarshal(body, &fields) != nil {
		return true
	}
	for _, want := range exact {
		for _, name := range slices.Sorted(maps.Keys(fields)) {
			if !strings.EqualFold(name, want) {
				continue
			}
			if path, bad := exactjson.Mangled(fields[name]); bad {
				field := want + path
				writeErr(w, http.StatusBadRequest, field, "%s: not valid UTF-8 as sent (an invalid byte or an unpaired surrogate escape, "+
					"which would be kept as U+FFFD and mean something else)", field)
				return false
			}
		}
	}
	return true
}

// renamedFields are the snake_case names earlier versions of the API took, with their
// camelCase names now.
var renamedFields = map[string]string{"chat_jid": "chatJid", "container_config": "containerConfig", "dry_run": "dryRun"}

// decode reads a JSON body into v strictly: unknown fields, wrong types, trailing data and
// oversized bodies are errors that name the field. The strings of the fields named in
// exact (rule text: a glob must mean what was sent) must be valid UTF-8 as sent, which
// encoding/json would otherwise turn into U+FFFD.
func decode(w http.ResponseWriter, r *http.Request, v any, exact ...string) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		writeErr(w, http.StatusUnsupportedMediaType, "", "Content-Type %q: send application/json", ct)
		return false
	}
	var body bytes.Buffer
	var in io.Reader = r.Body
	if len(exact) > 0 {
		in = io.TeeReader(r.Body, &body)
	}
	dec := json.NewDecoder(in)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("trailing data after the JSON object")
	}
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("trailing data after the JSON object")
		}
	}
	if err == nil {
		return exactFields(w, body.Bytes(), exact)
	}
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &tooBig):
		writeErr(w, http.StatusRequestEntityTooLarge, "", "body larger than %d bytes", tooBig.Limit)
	case errors.As(err, &typeErr):
		want := typeErr.Type.String()
		if typeErr.Type == durationType {
			want = `a duration like "90s" or a number of milliseconds`
		}
		writeErr(w, http.StatusBadRequest, typeErr.Field, "%s: must be %s, not %s", typeErr.Field, want, typeErr.Value)
	case errors.As(err, &syntaxErr):
		writeErr(w, http.StatusBadRequest, "", "malformed JSON at byte %d: %v", syntaxErr.Offset, err)
	case errors.Is(err, io.EOF):
		writeErr(w, http.StatusBadRequest, "", "empty body: send a JSON object")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		if now, ok := renamedFields[name]; ok {
			writeErr(w, http.StatusBadRequest, name, "unknown field %q: the API's fields are camelCase: send %s", name, now)
			return false
		}
		writeErr(w, http.StatusBadRequest, name, "unknown field %q", name)
	default:
		writeErr(w, http.StatusBadRequest, "", "bad JSON body: %v", err)
	}
	return false
}

// folderParam reads {folder}: a folder with its slashes escaped (main%2Fresearch) or its
// container slug (main-research).
func folderParam(w http.ResponseWriter, r *http.Request) (groupfolder.Folder, bool) {
	raw := r.PathValue("folder")
	f, err := parseFolder(raw)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "folder", "%v", err)
		return "", false
	}
	return f, true
}

func parseFolder(raw string) (groupfolder.Folder, error) {
	if !strings.Contains(raw, "/") && strings.Contains(raw, "-") {
		return groupfolder.ParseSlug(raw)
	}
	return groupfolder.Parse(raw)
}

// knownGroup checks that f is registered: work for unknown groups is refused.
func (s *Server) knownGroup(w http.ResponseWriter, r *http.Request, f groupfolder.Folder) bool {
	_, err := s.store.GetGroup(r.Context(), string(f))
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeErr(w, http.StatusNotFound, "folder", "unknown group %q: register it first (POST /v1/groups or `arizukod groups add %s`)", f, f)
		return false
	case err != nil:
		s.internal(w, r, err)
		return false
	}
	return true
}

func (s *Server) internal(w http.ResponseWriter, r *http.Request, err error) {
	s.log.Error("api", "method", r.Method, "path", r.URL.Path, "err", err)
	writeErr(w, http.StatusInternalServerError, "", "internal error: %v", err)
}

func (s *Server) getHealth(w http.ResponseWriter, r *http.Request) {
	h := s.health.Health(r.Context())
	code := http.StatusOK
	if h.Status != "ok" {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, h)
}

func (s *Server) getMetrics(w http.ResponseWriter, r *http.Request) {
	if s.Metrics == nil {
		writeErr(w, http.StatusNotFound, "", "no metrics on this server")
		return
	}
	s.Metrics.ServeHTTP(w, r)
}

// messagesField validates a message list.
func messagesField(w http.ResponseWriter, field string, msgs []contract.Message) bool {
	if len(msgs) == 0 {
		writeErr(w, http.StatusBadRequest, field, "%s: at least one message is required", field)
		return false
	}
	for i, m := range msgs {
		switch {
		case strings.TrimSpace(m.Content) == "":
			writeErr(w, http.StatusBadRequest, fmt.Sprintf("%s[%d].content", field, i), "%s[%d].content: must not be empty", field, i)
			return false
		case m.Role != "" && m.Role != "user" && m.Role != "assistant" && m.Role != "system":
			writeErr(w, http.StatusBadRequest, fmt.Sprintf("%s[%d].role", field, i), "%s[%d].role: %q is not user, assistant or system", field, i, m.Role)
			return false
		case !jidField(w, fmt.Sprintf("%s[%d].senderJid", field, i), m.SenderJID),
			!jidField(w, fmt.Sprintf("%s[%d].chatJid", field, i), m.ChatJID):
			return false
		}
		if m.Time != "" {
			if _, err := time.Parse(time.RFC3339Nano, m.Time); err != nil {
				name := fmt.Sprintf("%s[%d].time", field, i)
				writeErr(w, http.StatusBadRequest, name, "%s: %q is not an RFC 3339 time like 2030-01-02T15:04:05Z", name, m.Time)
				return false
			}
		}
	}
	return true
}

// MaxJIDBytes bounds a sender or chat JID: what the MCP tools accept as a chat_jid.
const MaxJIDBytes = 256

// jidField validates a sender or chat JID; empty is allowed (unknown).
func jidField(w http.ResponseWriter, field, v string) bool {
	switch {
	case len(v) > MaxJIDBytes:
		writeErr(w, http.StatusBadRequest, field, "%s: %d bytes, at most %d", field, len(v), MaxJIDBytes)
		return false
	case strings.ContainsFunc(v, unicode.IsControl):
		writeErr(w, http.StatusBadRequest, field, "%s: must not contain control characters", field)
		return false
	}
	return true
}

var durationType = reflect.TypeFor[apiwire.Duration]()

func queryInt(w http.ResponseWriter, r *http.Request, name string, def, lo, hi int64) (int64, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		writeErr(w, http.StatusBadRequest, name, "%s: %q is not a whole number from %d to %d", name, v, lo, hi)
		return 0, false
	}
	return n, true
}
