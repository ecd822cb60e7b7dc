package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/arizuko/arizukod/contract"
)

// Paths inside the container that the MCP entries point at.
const (
	RouterSocket     = contract.IPCDir + "/" + contract.RouterSocket
	SidecarSocketDir = contract.IPCDir + "/" + contract.SidecarDir
	// ManagedEnvKey lists, in settings.json's env, the keys arizukod set.
	ManagedEnvKey = "ARIZUKO_MANAGED_ENV"
	// RouterServer is the mcpServers name of the router.
	RouterServer = "arizuko"
	// PreCompactCommand is the PreCompact hook arizukod wires: the image's runner
	// archiving the transcript as an episode before Claude Code compacts it.
	PreCompactCommand = "/usr/local/bin/arizuko-claude pre-compact"

	settingsPath  = ".claude/settings.json"
	ownedSocketIn = "UNIX-CONNECT:" + contract.IPCDir + "/"
	maxSidecarLen = 64
)

var (
	// ErrCorruptSettings is wrapped when an existing settings.json cannot be
	// merged without losing what is in it.
	ErrCorruptSettings = errors.New("settings.json cannot be merged")
	// ErrInvalidEnv is wrapped when an env var name or value cannot be set.
	ErrInvalidEnv = errors.New("invalid env var")
	// ErrInvalidSidecar is wrapped when a sidecar name cannot name an MCP
	// server and a socket file.
	ErrInvalidSidecar = errors.New("invalid sidecar name")
)

// MCPServer is an mcpServers entry of settings.json.
type MCPServer struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

// socat is the entry that bridges the agent's stdio MCP client to a socket.
func socat(socket string) MCPServer {
	return MCPServer{Command: "socat", Args: []string{"STDIO", "UNIX-CONNECT:" + socket}}
}

// MergeSettings returns the settings.json content with arizukod's keys set
// and everything else in existing kept (see the package documentation for
// which keys are whose). existing may be empty (no file yet). The result ends
// with a newline; it equals existing when nothing changed and existing was
// already in this form.
func MergeSettings(existing []byte, env map[string]string, sidecars []string) ([]byte, error) {
	if err := checkEnv(env); err != nil {
		return nil, err
	}
	if err := checkSidecars(sidecars); err != nil {
		return nil, err
	}
	top := map[string]json.RawMessage{}
	if trimmed := bytes.TrimSpace(existing); len(trimmed) > 0 {
		if trimmed[0] != '{' {
			return nil, fmt.Errorf("%w: the top level is not a JSON object", ErrCorruptSettings)
		}
		if err := json.Unmarshal(trimmed, &top); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorruptSettings, err)
		}
	}
	var enc encoder
	envs, err := object(top, "env")
	if err != nil {
		return nil, err
	}
	if raw, ok := envs[ManagedEnvKey]; ok {
		var list string
		if json.Unmarshal(raw, &list) == nil {
			for _, k := range strings.Split(list, ",") {
				delete(envs, k)
			}
		}
		delete(envs, ManagedEnvKey)
	}
	for k, v := range env {
		envs[k] = enc.raw(v)
	}
	if len(env) > 0 {
		envs[ManagedEnvKey] = enc.raw(strings.Join(slices.Sorted(maps.Keys(env)), ","))
	}
	if len(envs) > 0 {
		top["env"] = enc.raw(envs)
	} else {
		delete(top, "env")
	}
	if err := mergeServers(top, &enc, sidecars); err != nil {
		return nil, err
	}
	if err := mergeHooks(top, &enc); err != nil {
		return nil, err
	}
	return indent(top, &enc)
}

// hookGroup is one matcher group of a hook event in settings.json.
type hookGroup struct {
	Matcher string        `json:"matcher"`
	Hooks   []hookCommand `json:"hooks"`
}

// hookCommand is one hook of a matcher group.
type hookCommand struct {
	Type    string `json:"type"`
	Command string `json:"command"`
}

// mergeHooks sets top's hooks.PreCompact to the operator's groups without any
// hook running PreCompactCommand, plus one group of arizukod's running it last.
// A group left empty by that removal was arizukod's and is dropped; every other
// group and event is kept as written.
func mergeHooks(top map[string]json.RawMessage, enc *encoder) error {
	hooks, err := object(top, "hooks")
	if err != nil {
		return err
	}
	var groups []json.RawMessage
	if raw, ok := hooks["PreCompact"]; ok && string(raw) != "null" {
		if len(raw) == 0 || raw[0] != '[' {
			return fmt.Errorf("%w: %q is not a JSON array", ErrCorruptSettings, "hooks.PreCompact")
		}
		if err := json.Unmarshal(raw, &groups); err != nil {
			return fmt.Errorf("%w: %q: %w", ErrCorruptSettings, "hooks.PreCompact", err)
		}
	}
	kept := make([]json.RawMessage, 0, len(groups)+1)
	for _, g := range groups {
		g, ok := withoutOurHook(g, enc)
		if ok {
			kept = append(kept, g)
		}
	}
	kept = append(kept, enc.raw(hookGroup{Hooks: []hookCommand{{Type: "command", Command: PreCompactCommand}}}))
	hooks["PreCompact"] = enc.raw(kept)
	top["hooks"] = enc.raw(hooks)
	return nil
}

// withoutOurHook returns a matcher group with the hooks running PreCompactCommand
// removed, and false when nothing else was in it. A group it cannot read is the
// operator's and kept verbatim.
func withoutOurHook(g json.RawMessage, enc *encoder) (json.RawMessage, bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(g, &fields) != nil {
		return g, true
	}
	var list []json.RawMessage
	if json.Unmarshal(fields["hooks"], &list) != nil {
		return g, true
	}
	others := slices.DeleteFunc(slices.Clone(list), func(h json.RawMessage) bool {
		var c hookCommand
		return json.Unmarshal(h, &c) == nil && c.Command == PreCompactCommand
	})
	switch {
	case len(others) == len(list):
		return g, true
	case len(others) == 0:
		return nil, false
	}
	fields["hooks"] = enc.raw(others)
	return enc.raw(fields), true
}

// mergeServers sets top's mcpServers: the router and the turn's sidecars, with every
// other bridge of arizukod's removed and everything else kept.
func mergeServers(top map[string]json.RawMessage, enc *encoder, sidecars []string) error {
	servers, err := object(top, "mcpServers")
	if err != nil {
		return err
	}
	for name, raw := range servers {
		if name == RouterServer || ownedBridge(raw) {
			delete(servers, name)
		}
	}
	servers[RouterServer] = enc.raw(socat(RouterSocket))
	for _, s := range sidecars {
		servers[s] = enc.raw(socat(SidecarSocketDir + "/" + s + ".sock"))
	}
	top["mcpServers"] = enc.raw(servers)
	return nil
}

// projectMCPKeys are the keys of a project of ~/.claude.json that make Claude Code start
// MCP servers: foreign entries, which only the agent can have written there.
var projectMCPKeys = []string{"mcpServers", "enabledMcpjsonServers", "enableAllProjectMcpServers"}

// MergeClaudeJSON returns Claude Code's state file ~/.claude.json with arizukod's MCP
// servers set at its top level (where Claude Code reads them for every directory), every
// other MCP server refused: removed from the top level, and the MCP keys (projectMCPKeys)
// removed from every project. The file is the agent's to write, so such an entry is code
// the agent planted for its next turn; the operator's MCP servers are sidecars, or the
// operator's copy of .mcp.json. removed names each entry taken out. Everything else is
// kept. existing must be a JSON object.
func MergeClaudeJSON(existing []byte, sidecars []string) (merged []byte, removed []string, err error) {
	if err := checkSidecars(sidecars); err != nil {
		return nil, nil, err
	}
	top := map[string]json.RawMessage{}
	trimmed := bytes.TrimSpace(existing)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, nil, fmt.Errorf("%w: the top level is not a JSON object", ErrCorruptSettings)
	}
	if err := json.Unmarshal(trimmed, &top); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCorruptSettings, err)
	}
	var enc encoder
	servers, err := object(top, "mcpServers")
	if err != nil {
		return nil, nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		if name != RouterServer && !ownedBridge(servers[name]) && !slices.Contains(sidecars, name) {
			removed = append(removed, "mcpServers."+name)
			delete(servers, name)
		}
	}
	top["mcpServers"] = enc.raw(servers)
	if err := mergeServers(top, &enc, sidecars); err != nil {
		return nil, nil, err
	}
	projects, err := object(top, "projects")
	if err != nil {
		return nil, nil, err
	}
	for _, dir := range slices.Sorted(maps.Keys(projects)) {
		var p map[string]json.RawMessage
		if json.Unmarshal(projects[dir], &p) != nil {
			continue
		}
		n := len(removed)
		for _, k := range projectMCPKeys {
			if _, ok := p[k]; ok {
				removed = append(removed, fmt.Sprintf("projects[%q].%s", dir, k))
				delete(p, k)
			}
		}
		if len(removed) > n {
			projects[dir] = enc.raw(p)
		}
	}
	if len(projects) > 0 {
		top["projects"] = enc.raw(projects)
	}
	out, err := indent(top, &enc)
	return out, removed, err
}

// indent renders top as two-space-indented JSON ending in a newline.
func indent(top map[string]json.RawMessage, enc *encoder) ([]byte, error) {
	if enc.err != nil {
		return nil, enc.err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, enc.raw(top), "", "  "); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptSettings, err)
	}
	out.WriteByte('\n')
	return out.Bytes(), enc.err
}

// object returns top[key] as an object (empty when absent or null).
func object(top map[string]json.RawMessage, key string) (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	raw, ok := top[key]
	if !ok || string(raw) == "null" {
		return m, nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fmt.Errorf("%w: %q is not a JSON object", ErrCorruptSettings, key)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrCorruptSettings, key, err)
	}
	return m, nil
}

// ownedBridge reports whether an mcpServers entry is a socat bridge to a
// socket under /var/run/pub/arizuko/, which only arizukod serves.
func ownedBridge(raw json.RawMessage) bool {
	var s MCPServer
	if json.Unmarshal(raw, &s) != nil || s.Command != "socat" {
		return false
	}
	return slices.ContainsFunc(s.Args, func(a string) bool { return strings.HasPrefix(a, ownedSocketIn) })
}

// encoder marshals values without HTML escaping and keeps the first error.
type encoder struct {
	err error
}

func (e *encoder) raw(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil && e.err == nil {
		e.err = fmt.Errorf("%w: %w", ErrCorruptSettings, err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// checkEnv accepts POSIX-style names ([A-Za-z_][A-Za-z0-9_]*), not
// ManagedEnvKey, with UTF-8 values (JSON carries nothing else) free of NUL
// bytes (execve cannot pass them).
func checkEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" {
			return fmt.Errorf("%w: empty name", ErrInvalidEnv)
		}
		for i := 0; i < len(k); i++ {
			c := k[i]
			if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
				return fmt.Errorf("%w %q: names are [A-Za-z_][A-Za-z0-9_]*", ErrInvalidEnv, k)
			}
		}
		if k == ManagedEnvKey {
			return fmt.Errorf("%w %q: reserved for arizukod's own bookkeeping", ErrInvalidEnv, k)
		}
		if strings.IndexByte(v, 0) >= 0 || !utf8.ValidString(v) {
			return fmt.Errorf("%w %q: the value must be UTF-8 without NUL bytes", ErrInvalidEnv, k)
		}
	}
	return nil
}

// checkSidecars accepts names of 1-64 bytes of [A-Za-z0-9_.-] starting with a
// letter or digit, unique, other than RouterServer.
func checkSidecars(names []string) error {
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" || len(n) > maxSidecarLen {
			return fmt.Errorf("%w %q: must be 1-%d bytes", ErrInvalidSidecar, n, maxSidecarLen)
		}
		for i := 0; i < len(n); i++ {
			c := n[i]
			alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
			if !alnum && (i == 0 || c != '_' && c != '.' && c != '-') {
				return fmt.Errorf("%w %q: names are [A-Za-z0-9][A-Za-z0-9_.-]*", ErrInvalidSidecar, n)
			}
		}
		if n == RouterServer {
			return fmt.Errorf("%w %q: the router's name", ErrInvalidSidecar, n)
		}
		if seen[n] {
			return fmt.Errorf("%w %q: listed twice", ErrInvalidSidecar, n)
		}
		seen[n] = true
	}
	return nil
}

// writeSettings merges settings.json in place; it writes only when the
// content changes and keeps an existing file's mode.
func (t tree) writeSettings(env map[string]string, sidecars []string) error {
	if err := t.mkdirAll(".claude"); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	existing, st, err := t.readRegular(settingsPath)
	mode := fs.FileMode(secretMode)
	switch {
	case err == nil:
		mode = st.Mode().Perm()
	case errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, errNotRegular):
		return fmt.Errorf("session: %s: %w: %w", t.path(settingsPath), ErrCorruptSettings, err)
	default:
		return fmt.Errorf("session: read %s: %w", t.path(settingsPath), err)
	}
	merged, err := MergeSettings(existing, env, sidecars)
	if err != nil {
		return fmt.Errorf("session: %s: %w", t.path(settingsPath), err)
	}
	if bytes.Equal(merged, existing) {
		return nil
	}
	if err := t.writeAtomic(settingsPath, merged, mode); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	return nil
}

// path names a file for an error message: the session directory plus name.
func (t tree) path(name string) string {
	return t.root.Name() + "/" + name
}

// ClaudeEnv is what arizukod writes into settings.json's env for a group (seed 000's
// seedSettings: "env vars"): Claude Code's settings for a container without a network (no
// nonessential traffic, no auto-updater, MCP tools offered directly rather than behind a
// tool search) and the group's folder. The image's runner sets the same in Claude Code's
// environment; here they also hold for a `claude` started by hand in the session, and for
// the agent's own subprocesses. Nothing secret goes here: the file lives on the agent's
// ground and outlives the turn (credentials come through the env file and the turn's token).
func ClaudeEnv(folder string) map[string]string {
	return map[string]string{
		"ARIZUKO_FOLDER": folder,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"DISABLE_AUTOUPDATER":                      "1",
		"ENABLE_TOOL_SEARCH":                       "false",
	}
}
