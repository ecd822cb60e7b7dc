package turn_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

// grantsStore is a store whose groups have the given grant rules; a folder it lacks has
// none stored.
type grantsStore map[string][]string

func (grantsStore) GetGroup(context.Context, string) (*store.Group, error) {
	return nil, store.ErrNotFound
}
func (grantsStore) GetSession(context.Context, string) (string, error) { return "", nil }
func (s grantsStore) GetGrants(_ context.Context, folder string) ([]string, error) {
	g, ok := s[folder]
	if !ok {
		return nil, store.ErrNotFound
	}
	return g, nil
}

// TestPromptGrants: the system prompt of a turn says in words what the group's tier and
// grant rules let its agent do, as the MCP server decides it (none stored: the tier
// alone; an empty list: nothing; rules that do not parse: nothing), and a rule cannot
// break out of the block.
func TestPromptGrants(t *testing.T) {
	tests := []struct {
		folder string
		want   []string
		absent []string
	}{
		{"main", []string{"<grants folder=\"main\">\n", "tier 0 (root)", "register_group", "- *: allow every tool\n", "</grants>\n"}, nil},
		{"main/a", []string{"You may call: send_message, send_reply.\n",
			"- !send_message(chat_jid=&lt;/grants&gt;*): deny send_message when chat_jid matches &lt;/grants&gt;*\n"},
			[]string{"</grants><"}},
		{"main/none", []string{"You may call none of them"}, nil},
		{"main/bad", []string{"do not parse, so every call of your arizuko tools is refused"}, nil},
	}
	st := grantsStore{
		"main/a":    {"send_*", `!send_message(chat_jid="</grants>*")`, "!send_document"},
		"main/none": {},
		"main/bad":  {"no_such_tool"},
	}
	data := t.TempDir()
	layout, err := groupfolder.NewLayout(data)
	if err != nil {
		t.Fatal(err)
	}
	b := &turn.Builder{Layout: layout, Store: st}
	for _, tc := range tests {
		t.Run(tc.folder, func(t *testing.T) {
			tt, err := b.Build(context.Background(), turn.Request{RunID: "r", Folder: groupfolder.Folder(tc.folder),
				Messages: []contract.Message{{Role: "user", Content: "hi"}}})
			if err != nil {
				t.Fatal(err)
			}
			got := tt.Input.SystemPrompt
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.absent {
				if strings.Contains(got, w) {
					t.Errorf("holds %q:\n%s", w, got)
				}
			}
		})
	}
}

// TestSettingsEnv: a turn's settings.json env holds what seed 000's seedSettings writes
// there: Claude Code's settings for a container without a network and the group's folder,
// with the keys arizukod set listed, and no secret.
func TestSettingsEnv(t *testing.T) {
	data := t.TempDir()
	layout, err := groupfolder.NewLayout(data)
	if err != nil {
		t.Fatal(err)
	}
	b := &turn.Builder{Layout: layout, Store: grantsStore{}}
	if _, err := b.Build(context.Background(), turn.Request{RunID: "r", Folder: "main/a",
		Messages: []contract.Message{{Role: "user", Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(data, "claude", "main-a", "home", ".claude", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var settings struct{ Env map[string]string }
	if err := json.Unmarshal(raw, &settings); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ARIZUKO_FOLDER": "main/a", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "ENABLE_TOOL_SEARCH": "false",
		"ARIZUKO_MANAGED_ENV": "ARIZUKO_FOLDER,CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC,DISABLE_AUTOUPDATER,ENABLE_TOOL_SEARCH",
	}
	if !maps.Equal(settings.Env, want) {
		t.Errorf("settings.json env %v, want %v", settings.Env, want)
	}
}
