package ipc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/arizuko/arizukod/ipc/policy"
	"github.com/arizuko/arizukod/store"
)

// The gate: what tools/list shows, and the checks every tools/call passes in order (the
// tier, the arguments, the defaults, the grant rules read again, then the tool).

// listingKey marks the context of a tools/list request for the filter.
type listingKey struct{}

func (s *Server) handle(ctx context.Context, msg []byte) mcp.JSONRPCMessage {
	var head struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(msg, &head) == nil && head.Method == string(mcp.MethodToolsList) {
		ctx = context.WithValue(ctx, listingKey{}, true)
	}
	return s.mcp.HandleMessage(ctx, msg)
}

// filterListing keeps in tools/list exactly the tools the caller may call:
// those its tier allows and its grant rules (read now, so that changes apply
// at once) could pass. mcp-go also runs the filter before each tools/call;
// there it keeps the tool, so that the call reaches handler, which denies it
// with the reason instead of a bare "not found".
func (s *Server) filterListing(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	if ctx.Value(listingKey{}) == nil {
		return tools
	}
	rules, refusal, err := s.grants(ctx)
	if err != nil {
		s.log.Error("ipc: read grants for tools/list", "err", err)
		return nil
	}
	if refusal != "" {
		return nil
	}
	out := make([]mcp.Tool, 0, len(tools))
	for _, t := range tools {
		if policy.Allowed(t.Name, s.tier, rules) && policy.RuleProblem(rules, t.Name) == "" {
			out = append(out, t)
		}
	}
	return out
}

// grants reads the caller's grant rules: DefaultRules when none were ever
// set, no rules at all (everything denied) when they were set to none. A
// rule list that does not parse denies every call; refusal then says why.
func (s *Server) grants(ctx context.Context) (rules policy.Rules, refusal string, err error) {
	list, err := s.store.GetGrants(ctx, s.folder)
	if errors.Is(err, store.ErrNotFound) {
		return policy.DefaultRules(), "", nil
	}
	if err != nil {
		return nil, "", err
	}
	if len(list) == 0 {
		return policy.Rules{}, "", nil
	}
	rules, err = policy.ParseRules(list)
	if err != nil {
		refusal = fmt.Sprintf("the grant rules of %s do not parse, so every call is denied: %v", s.folder, err)
		s.warnOnce(refusal)
		return nil, refusal, nil
	}
	return rules, "", nil
}

func (s *Server) warnOnce(msg string) {
	if _, seen := s.warned.LoadOrStore(msg, struct{}{}); !seen {
		s.log.Warn("ipc: " + msg)
	}
}

// userError is a tool failure the agent caused and can fix; its text is
// the tool error. Any other error is logged and reported as internal.
type userError struct{ msg string }

func (e *userError) Error() string { return e.msg }

func fail(format string, a ...any) error { return &userError{msg: fmt.Sprintf(format, a...)} }

// handler gates and runs one tool for every tools/call.
func (s *Server) handler(spec *toolSpec) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		if !s.bound.Load() {
			// A warm agent before its turn: nothing is served (ServerConfig.Held).
			s.log.Warn("ipc: tool call refused before the turn", "tool", spec.name)
			return mcp.NewToolResultError("refused: no turn runs yet; tools answer once the turn begins"), nil
		}
		res, outcome := s.call(ctx, spec, req.GetRawArguments())
		level := slog.LevelInfo
		if outcome == "internal error" {
			level = slog.LevelError
		}
		end := time.Now()
		s.log.Log(ctx, level, "ipc: tool call", "tool", spec.name, "outcome", outcome, "ms", end.Sub(start).Milliseconds())
		if s.cfg.OnTool != nil {
			s.cfg.OnTool(spec.name, outcome, start, end)
		}
		return res, nil
	}
}

// call checks and runs one call: the tier, the arguments (types, sizes),
// the defaults, the grant rules (re-read from the store) with the final
// arguments, then the tool. Refusals and failures are tool errors.
func (s *Server) call(ctx context.Context, spec *toolSpec, raw any) (*mcp.CallToolResult, string) {
	if !policy.TierAllows(spec.name, s.tier) {
		return s.deny(&policy.DeniedError{Tool: spec.name, Tier: s.tier, ByTier: true, Reason: policy.TierRefusal(spec.name, s.tier)})
	}
	m, err := decodeArgs(raw)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), "bad arguments"
	}
	a, err := checkArgs(spec.params, m, "")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), "bad arguments"
	}
	if spec.defaults != nil {
		if err := spec.defaults(s, a); err != nil {
			return mcp.NewToolResultError(err.Error()), "bad arguments"
		}
	}
	rules, refusal, err := s.grants(ctx)
	if err != nil {
		s.log.Error("ipc: read grants", "tool", spec.name, "err", err)
		return mcp.NewToolResultError("internal error: the grant rules could not be read; the daemon logged the cause"), "internal error"
	}
	if refusal == "" {
		refusal = policy.RuleProblem(rules, spec.name)
	}
	if refusal != "" {
		return s.deny(&policy.DeniedError{Tool: spec.name, Tier: s.tier, Reason: refusal})
	}
	if err := policy.CheckCall(spec.name, s.tier, rules, a); err != nil {
		var de *policy.DeniedError
		errors.As(err, &de)
		return s.deny(de)
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	out, err := spec.run(s, ctx, a)
	var scoped *policy.DeniedError
	if errors.As(err, &scoped) {
		return s.deny(scoped)
	}
	if err != nil {
		var ue *userError
		var ae *argError
		switch {
		case errors.As(err, &ue), errors.As(err, &ae),
			errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrInvalid):
			return mcp.NewToolResultError(err.Error()), "failed"
		}
		s.log.Error("ipc: tool failed", "tool", spec.name, "err", err)
		return mcp.NewToolResultError("internal error in " + spec.name + "; the daemon logged the cause"), "internal error"
	}
	b, err := json.Marshal(out)
	if err != nil {
		s.log.Error("ipc: encode result", "tool", spec.name, "err", err)
		return mcp.NewToolResultError("internal error in " + spec.name + "; the daemon logged the cause"), "internal error"
	}
	return mcp.NewToolResultStructured(out, string(b)), "ok"
}

func (s *Server) deny(de *policy.DeniedError) (*mcp.CallToolResult, string) {
	s.log.Warn("ipc: tool call denied", "tool", de.Tool, "tier", de.Tier, "reason", de.Reason)
	return mcp.NewToolResultError("denied: " + de.Reason), "denied"
}
