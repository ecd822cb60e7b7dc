package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

var (
	testEnv      = map[string]string{"ARIZUKO_FOLDER": "main", "TZ": "Europe/Berlin", "HTML": "<a&b>"}
	testSidecars = []string{"search", "calendar"}
)

// TestMergeSettingsGolden: operator keys survive verbatim, arizukod's keys
// are replaced, stale ones removed; merging the result again changes nothing.
func TestMergeSettingsGolden(t *testing.T) {
	for _, name := range []string{"operator", "empty-object", "empty-file", "nulls"} {
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", "settings", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := MergeSettings(in, testEnv, testSidecars)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "settings", name+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./session -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("differs from %s:\n--- got\n%s--- want\n%s", golden, got, want)
			}
			again, err := MergeSettings(got, testEnv, testSidecars)
			if err != nil || !bytes.Equal(again, got) {
				t.Errorf("second merge changed the file (%v):\n%s", err, again)
			}
		})
	}
}

func TestMergeSettingsOperatorKeys(t *testing.T) {
	in, err := os.ReadFile("testdata/settings/operator.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := MergeSettings(in, testEnv, testSidecars)
	if err != nil {
		t.Fatal(err)
	}
	var before, after map[string]json.RawMessage
	if err := json.Unmarshal(in, &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &after); err != nil {
		t.Fatal(err)
	}
	for k, v := range before {
		if k == "env" || k == "mcpServers" || k == "hooks" {
			continue
		}
		if !jsonEqual(t, v, after[k]) {
			t.Errorf("operator key %s changed: %s -> %s", k, v, after[k])
		}
	}
	var env map[string]string
	var servers map[string]MCPServer
	if err := json.Unmarshal(after["env"], &env); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(after["mcpServers"], &servers); err != nil {
		t.Fatal(err)
	}
	wantEnv := map[string]string{
		"OPERATOR_VAR": "kept", "TZ": "Europe/Berlin", "ARIZUKO_FOLDER": "main", "HTML": "<a&b>",
		ManagedEnvKey: "ARIZUKO_FOLDER,HTML,TZ",
	}
	if !mapsEqual(env, wantEnv) {
		t.Errorf("env = %v, want %v", env, wantEnv)
	}
	for name, want := range map[string]string{
		"arizuko":  "UNIX-CONNECT:/var/run/pub/arizuko/router.sock",
		"search":   "UNIX-CONNECT:/var/run/pub/arizuko/sidecars/search.sock",
		"calendar": "UNIX-CONNECT:/var/run/pub/arizuko/sidecars/calendar.sock",
	} {
		s := servers[name]
		if s.Command != "socat" || len(s.Args) != 2 || s.Args[0] != "STDIO" || s.Args[1] != want {
			t.Errorf("mcpServers.%s = %+v", name, s)
		}
	}
	for _, gone := range []string{"oldsidecar"} {
		if _, ok := servers[gone]; ok {
			t.Errorf("stale mcpServers.%s kept", gone)
		}
	}
	for _, kept := range []string{"github", "operator-socat"} {
		if _, ok := servers[kept]; !ok {
			t.Errorf("operator mcpServers.%s lost", kept)
		}
	}
	if !strings.Contains(string(out), `"bigNumber": 12345678901234567890123`) || !strings.Contains(string(out), `"float": 1.50`) ||
		!strings.Contains(string(out), `"caf\u00e9 <b> & \"q\""`) {
		t.Errorf("operator values not kept verbatim:\n%s", out)
	}
}

func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return false
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestMergeSettingsDrops: an env var or a sidecar removed from the
// configuration disappears from the file; operator entries stay.
func TestMergeSettingsDrops(t *testing.T) {
	first, err := MergeSettings([]byte(`{"env":{"MINE":"1"},"mcpServers":{"op":{"command":"x"}}}`), map[string]string{"A": "1", "SECRET": "s"}, []string{"x", "y"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := MergeSettings(first, map[string]string{"A": "2"}, []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Env        map[string]string
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(second, &got); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"MINE": "1", "A": "2", ManagedEnvKey: "A"}; !mapsEqual(got.Env, want) {
		t.Errorf("env = %v, want %v", got.Env, want)
	}
	if _, ok := got.MCPServers["y"]; ok || len(got.MCPServers) != 3 {
		t.Errorf("mcpServers = %s, want op, arizuko and x", second)
	}
	third, err := MergeSettings(second, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(third), ManagedEnvKey) || !strings.Contains(string(third), `"MINE": "1"`) {
		t.Errorf("without env of ours: %s", third)
	}
}

// TestMergeSettingsHooks: arizukod's PreCompact hook is wired once, in a group of its own
// after the operator's; the operator's other hooks, in the same event or another, survive.
func TestMergeSettingsHooks(t *testing.T) {
	ours := `{"matcher":"","hooks":[{"type":"command","command":"` + PreCompactCommand + `"}]}`
	tests := []struct {
		name, in string
		want     []string
	}{
		{"no hooks", `{}`, []string{ours}},
		{"null PreCompact", `{"hooks":{"PreCompact":null}}`, []string{ours}},
		{"operator's kept first", `{"hooks":{"PreCompact":[{"hooks":[{"type":"command","command":"a"}]}]}}`,
			[]string{`{"hooks":[{"type":"command","command":"a"}]}`, ours}},
		{"ours moved out of a shared group", `{"hooks":{"PreCompact":[{"matcher":"auto","hooks":[{"type":"command","command":"` + PreCompactCommand + `"},{"type":"command","command":"b","timeout":5}]}]}}`,
			[]string{`{"hooks":[{"type":"command","command":"b","timeout":5}],"matcher":"auto"}`, ours}},
		{"duplicates of ours dropped", `{"hooks":{"PreCompact":[` + ours + `,` + ours + `]}}`, []string{ours}},
		{"unreadable group kept", `{"hooks":{"PreCompact":[42,{"hooks":"x"}]}}`, []string{`42`, `{"hooks":"x"}`, ours}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := MergeSettings([]byte(tt.in), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Hooks map[string][]json.RawMessage
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			groups := got.Hooks["PreCompact"]
			if len(groups) != len(tt.want) {
				t.Fatalf("PreCompact = %s, want %d groups", out, len(tt.want))
			}
			for i, w := range tt.want {
				if !jsonEqual(t, groups[i], json.RawMessage(w)) {
					t.Errorf("group %d = %s, want %s", i, groups[i], w)
				}
			}
			again, err := MergeSettings(out, nil, nil)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("second merge changed the file (%v):\n%s", err, again)
			}
		})
	}
	out, err := MergeSettings([]byte(`{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"n"}]}]}}`), nil, nil)
	if err != nil || !strings.Contains(string(out), `"command": "n"`) {
		t.Errorf("operator's Stop hook lost (%v):\n%s", err, out)
	}
}

func TestMergeSettingsCorrupt(t *testing.T) {
	for _, in := range []string{
		`{"a": }`,
		`[]`,
		`null`,
		`"text"`,
		`{"env": []}`,
		`{"env": "A=1"}`,
		`{"mcpServers": "x"}`,
		`{"hooks": []}`,
		`{"hooks": {"PreCompact": {}}}`,
		`{"hooks": {"PreCompact": "x"}}`,
		`{"mcpServers": {"a": 1}, "env": {"A": }}`,
		`{} {}`,
	} {
		if got, err := MergeSettings([]byte(in), testEnv, testSidecars); !errors.Is(err, ErrCorruptSettings) {
			t.Errorf("MergeSettings(%s) = %s, %v; want ErrCorruptSettings", in, got, err)
		}
	}
}

func TestMergeSettingsInvalid(t *testing.T) {
	for _, tc := range []struct {
		env      map[string]string
		sidecars []string
		want     error
	}{
		{map[string]string{"": "x"}, nil, ErrInvalidEnv},
		{map[string]string{"1A": "x"}, nil, ErrInvalidEnv},
		{map[string]string{"A-B": "x"}, nil, ErrInvalidEnv},
		{map[string]string{"A=B": "x"}, nil, ErrInvalidEnv},
		{map[string]string{ManagedEnvKey: "x"}, nil, ErrInvalidEnv},
		{map[string]string{"A": "x\x00y"}, nil, ErrInvalidEnv},
		{map[string]string{"A": "\xff"}, nil, ErrInvalidEnv},
		{nil, []string{""}, ErrInvalidSidecar},
		{nil, []string{"arizuko"}, ErrInvalidSidecar},
		{nil, []string{"../x"}, ErrInvalidSidecar},
		{nil, []string{"a/b"}, ErrInvalidSidecar},
		{nil, []string{".x"}, ErrInvalidSidecar},
		{nil, []string{"-x"}, ErrInvalidSidecar},
		{nil, []string{"x", "x"}, ErrInvalidSidecar},
		{nil, []string{strings.Repeat("a", 65)}, ErrInvalidSidecar},
	} {
		if _, err := MergeSettings(nil, tc.env, tc.sidecars); !errors.Is(err, tc.want) {
			t.Errorf("env %q sidecars %q: err = %v, want %v", tc.env, tc.sidecars, err, tc.want)
		}
	}
	if _, err := MergeSettings(nil, map[string]string{"_a1": "ok", "PATH": ""}, []string{"a", "A.b_c-1", strings.Repeat("a", 64)}); err != nil {
		t.Errorf("valid names: %v", err)
	}
}

func FuzzMergeSettings(f *testing.F) {
	for _, s := range []string{`{}`, `{"env":{"A":"1","ARIZUKO_MANAGED_ENV":"A,B"}}`, `{"mcpServers":{"x":{"command":"socat","args":["UNIX-CONNECT:/var/run/pub/arizuko/x"]}}}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := MergeSettings(in, testEnv, testSidecars)
		if err != nil {
			if !errors.Is(err, ErrCorruptSettings) {
				t.Fatalf("error without ErrCorruptSettings: %v", err)
			}
			return
		}
		again, err := MergeSettings(out, testEnv, testSidecars)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %v\n%s\n%s", err, out, again)
		}
	})
}

func TestMergeClaudeJSON(t *testing.T) {
	in := `{"numStartups": 3, "projects": {"/workspace": {"hasTrustDialogAccepted": true, "allowedTools": [],
      "mcpServers": {"planted": {"command": "sh"}}, "enabledMcpjsonServers": ["x"], "enableAllProjectMcpServers": true}},
  "mcpServers": {"mine": {"command": "node", "args": ["x.js"]},
    "gone": {"command": "socat", "args": ["STDIO", "UNIX-CONNECT:/var/run/pub/arizuko/sidecars/gone.sock"]}},
  "big": 12345678901234567890}`
	out, removed, err := MergeClaudeJSON([]byte(in), []string{"search"})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	var servers map[string]MCPServer
	json.Unmarshal(got["mcpServers"], &servers)
	if servers["arizuko"].Args[1] != "UNIX-CONNECT:"+RouterSocket ||
		servers["search"].Args[1] != "UNIX-CONNECT:"+SidecarSocketDir+"/search.sock" || len(servers) != 2 {
		t.Errorf("mcpServers: %+v", servers)
	}
	want := []string{"mcpServers.mine", `projects["/workspace"].mcpServers`, `projects["/workspace"].enabledMcpjsonServers`, `projects["/workspace"].enableAllProjectMcpServers`}
	if !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	if string(got["big"]) != "12345678901234567890" || string(got["numStartups"]) != "3" ||
		!strings.Contains(string(got["projects"]), "allowedTools") || strings.Contains(string(got["projects"]), "planted") {
		t.Errorf("other keys changed: %s", out)
	}
	again, removed, err := MergeClaudeJSON(out, []string{"search"})
	if err != nil || string(again) != string(out) || len(removed) != 0 {
		t.Errorf("merging twice changes the file: %v %q\n%s\n%s", err, removed, out, again)
	}
	for _, bad := range []string{"", "[]", "not json", `{"mcpServers": []}`} {
		if _, _, err := MergeClaudeJSON([]byte(bad), nil); !errors.Is(err, ErrCorruptSettings) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
