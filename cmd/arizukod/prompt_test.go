package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrompt(t *testing.T) {
	data := t.TempDir()
	group := filepath.Join(data, "groups", "main", "research")
	for name, content := range map[string]string{
		"diary/2025-01-01.md":         "---\nsummary: Yesterday's work.\n---\n",
		"diary/2025-01-02.md":         "---\nsummary: Today's <work>.\n---\n",
		"facts/rules.md":              "Be brief.\n",
		"users/telegram%3A42.md":      "Alice.\n",
		"episodes/2024-12-31-wrap.md": "---\nsummary: Year wrap-up.\ndate: 2024-12-31\n---\n",
	} {
		p := filepath.Join(group, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut bytes.Buffer
	err := runPrompt(context.Background(), []string{"--folder", "main/research", "--sender", "telegram:42", "--now", "2025-01-02", "--tz", "Europe/Berlin", "--data-dir", data}, &out, &errOut)
	if err != nil {
		t.Fatalf("%v (stderr %s)", err, errOut.String())
	}
	want := `<knowledge layer="diary">
<entry age="today" date="2025-01-02">Today's &lt;work&gt;.</entry>
<entry age="yesterday" date="2025-01-01">Yesterday's work.</entry>
</knowledge>
<knowledge layer="episodes">
<entry age="2 days ago" date="2024-12-31" file="2024-12-31-wrap.md">Year wrap-up.</entry>
</knowledge>
<knowledge layer="facts" file="rules.md">
Be brief.
</knowledge>
<knowledge layer="user" jid="telegram:42">
Alice.
</knowledge>
`
	if out.String() != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", out.String(), want)
	}
	if errOut.Len() != 0 {
		t.Errorf("stderr: %s", errOut.String())
	}
}

func TestPromptErrors(t *testing.T) {
	data := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
		is   error
	}{
		{[]string{"--data-dir", data}, "--folder", nil},
		{[]string{"--folder", "../etc", "--data-dir", data}, "--folder", nil},
		{[]string{"--folder", "main", "--now", "2025-13-01", "--data-dir", data}, "--now", nil},
		{[]string{"--folder", "main", "--tz", "Mars/Olympus", "--data-dir", data}, "--tz", nil},
		{[]string{"--folder", "main", "--data-dir", data}, "", fs.ErrNotExist},
		{[]string{"--folder", "main", "stray"}, "", errUsage},
		{[]string{"--bogus"}, "", errUsage},
		{[]string{"--help"}, "", flag.ErrHelp},
	} {
		var out, errOut bytes.Buffer
		err := runPrompt(context.Background(), tc.args, &out, &errOut)
		if err == nil || tc.is != nil && !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %v naming %q", tc.args, err, tc.is, tc.want)
		}
		if out.Len() != 0 {
			t.Errorf("%q: wrote to stdout: %q", tc.args, out.String())
		}
	}
	var out, errOut bytes.Buffer
	if err := runPrompt(context.Background(), []string{"--help"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) || !strings.Contains(errOut.String(), "usage: arizukod prompt --folder F") {
		t.Errorf("--help: %v, usage %q", err, errOut.String())
	}
}
