package mountsec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

const secretValue = "sk-ant-SECRET-VALUE-1234567890"

func TestParseEnvFile(t *testing.T) {
	in := "\xef\xbb\xbf# comment\n" +
		"\n" +
		"   # indented comment\n" +
		"PLAIN=value\r\n" +
		"export EXPORTED=yes\n" +
		"export\tTABBED=tab\n" +
		"SPACED = spaced value  \n" +
		"INLINE=abc # trailing comment\n" +
		"HASH=abc#def\n" +
		"LEADHASH=#notacomment\n" +
		"EMPTY=\n" +
		"SPACEHASH= # only a comment\n" +
		"SINGLE='it''s # not a comment'\n" +
		"SQ='a \"b\" $c \\n'  # comment\n" +
		"DQ=\"line\\nnext \\\"q\\\" \\\\ \\$x \\q\"\n" +
		"DUP=first\n" +
		"DUP=second\n" +
		"exporter=notexport\n" +
		"JOINED='it'\\''s '\"\\\"x\\\"\"\n" +
		"_U9=ok"
	got, err := ParseEnvFile([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"PLAIN": "value", "EXPORTED": "yes", "TABBED": "tab", "SPACED": "spaced value", "INLINE": "abc",
		"HASH": "abc#def", "LEADHASH": "#notacomment", "SPACEHASH": "", "EMPTY": "", "SQ": `a "b" $c \n`,
		"DQ": "line\nnext \"q\" \\ $x \\q", "DUP": "second", "exporter": "notexport", "_U9": "ok",
		"SINGLE": "its # not a comment", "JOINED": "it's \"x\"",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestParseEnvFileErrors(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"OK=1\n" + secretValue + "\n", "line 2: missing '='"},
		{"9BAD=" + secretValue, "line 1: invalid variable name"},
		{"BAD-NAME=" + secretValue, "line 1: invalid variable name"},
		{secretValue + " TOKEN=" + secretValue, "line 1: invalid variable name"},
		{"=" + secretValue, "line 1: invalid variable name"},
		{"K='" + secretValue, "line 1: variable K: unterminated single quote"},
		{"K=\"" + secretValue, "line 1: variable K: unterminated double quote"},
		{"K=\"" + secretValue + "\\\"", "line 1: variable K: unterminated double quote"},
		{"K='" + secretValue + "'x" + secretValue, "line 1: variable K: unexpected text after the closing quote"},
		{"A=1\nB=2\nK=" + secretValue + "\x00", "line 3: NUL byte"},
		{"export =" + secretValue, "line 1: invalid variable name"},
	} {
		_, err := ParseEnvFile([]byte(tc.in))
		if err == nil {
			t.Errorf("%q accepted", tc.in)
			continue
		}
		if !errors.Is(err, ErrEnvFile) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %q, want %q", err, tc.want)
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("error echoes the value: %q", err)
		}
	}
}

func fakeIdentity(name, email string, err error) GitIdentityFunc {
	return func(context.Context) (GitIdentity, error) { return GitIdentity{Name: name, Email: email}, err }
}

func TestBuildEnvFile(t *testing.T) {
	dir := t.TempDir()
	envFile := filepath.Join(dir, ".env")
	body := "ANTHROPIC_API_KEY=" + secretValue + "\n" +
		"GH_TOKEN='ghp_abcdef'\n" +
		"DATABASE_URL=postgres://root:pw@db/prod\n" +
		"AWS_SECRET_ACCESS_KEY=aws-secret\n" +
		"MY_EXTRA=extra-value\n" +
		"GIT_AUTHOR_NAME=From Env\n"
	if err := os.WriteFile(envFile, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := BuildEnvFile(context.Background(), envFile, []string{"MY_EXTRA"}, fakeIdentity("Ada", "ada@example.org", nil))
	if err != nil {
		t.Fatal(err)
	}
	// ANTHROPIC_API_KEY is the model credential: the gateway holds it, no container gets it.
	want := Secrets{
		"GH_TOKEN": "ghp_abcdef", "MY_EXTRA": "extra-value",
		"GIT_AUTHOR_NAME": "From Env", "GIT_COMMITTER_NAME": "Ada",
		"GIT_AUTHOR_EMAIL": "ada@example.org", "GIT_COMMITTER_EMAIL": "ada@example.org",
	}
	if !reflect.DeepEqual(map[string]string(s), map[string]string(want)) {
		t.Errorf("got names %v", s.Names())
	}
	if s2, err := BuildEnvFile(context.Background(), "", nil, fakeIdentity("", "", nil)); err != nil || len(s2) != 0 {
		t.Errorf("no env file, no identity: %v, %v", s2, err)
	}
	if _, err := BuildEnvFile(context.Background(), filepath.Join(dir, "missing"), nil, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing env file: %v", err)
	}
	if _, err := BuildEnvFile(context.Background(), "", nil, fakeIdentity("", "", errors.New("boom"))); err == nil {
		t.Error("identity error ignored")
	}
	bad := filepath.Join(dir, "bad.env")
	if err := os.WriteFile(bad, []byte("OK=1\nK='"+secretValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := BuildEnvFile(context.Background(), bad, nil, nil); !errors.Is(err, ErrEnvFile) || strings.Contains(err.Error(), secretValue) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("malformed env file: %v", err)
	}
	for _, name := range []string{"PATH", "LD_PRELOAD", "ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "BASH_ENV", "bad-name", "", "1X"} {
		if _, err := BuildEnvFile(context.Background(), "", []string{name}, nil); !errors.Is(err, ErrEnvName) {
			t.Errorf("extra name %q: %v", name, err)
		}
	}
}

func TestGitConfigIdentity(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("ARIZUKO_REQUIRE_ENGINES") == "1" {
			t.Fatal("git not installed (ARIZUKO_REQUIRE_ENGINES=1)")
		}
		t.Skip("git not installed")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("GIT_CONFIG_GLOBAL", "")
	os.Unsetenv("GIT_CONFIG_GLOBAL")
	id, err := GitConfigIdentity(context.Background())
	if err != nil || id != (GitIdentity{}) {
		t.Errorf("unset identity: %+v, %v", id, err)
	}
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = Ada Lovelace\n\temail = ada@example.org\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	id, err = GitConfigIdentity(context.Background())
	if err != nil || id != (GitIdentity{Name: "Ada Lovelace", Email: "ada@example.org"}) {
		t.Errorf("identity: %+v, %v", id, err)
	}
	t.Setenv("PATH", "")
	if id, err := GitConfigIdentity(context.Background()); err != nil || id != (GitIdentity{}) {
		t.Errorf("no git: %+v, %v", id, err)
	}
}

func TestWriteEnvFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "env")
	vars := map[string]string{
		"ANTHROPIC_API_KEY": secretValue,
		"QUOTE":             `it's "quoted" $(rm -rf /) ` + "`x`" + ` \ end`,
		"EMPTY":             "",
	}
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteEnvFile(p, vars); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", st.Mode(), err)
	}
	data, _ := os.ReadFile(p)
	wantLines := "ANTHROPIC_API_KEY='" + secretValue + "'\nEMPTY=''\nQUOTE='it'\\''s \"quoted\" $(rm -rf /) `x` \\ end'\n"
	if !strings.HasSuffix(string(data), wantLines) {
		t.Errorf("file:\n%s", data)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temp files left: %v", entries)
	}
	back, err := ParseEnvFile(data)
	if err != nil || !reflect.DeepEqual(back, vars) {
		t.Errorf("round trip: %v", err)
	}
	if sh, err := exec.LookPath("sh"); err == nil {
		out, err := exec.Command(sh, "-c", `. "$1" && printf %s "$QUOTE"`, "sh", p).Output()
		if err != nil || string(out) != vars["QUOTE"] {
			t.Errorf("sh sourced %q, %v", out, err)
		}
	}
	for _, bad := range []map[string]string{{"K": "a\nb"}, {"K": "a\x00"}, {"K": "a\rb"}, {"BAD-NAME": "x"}} {
		err := WriteEnvFile(p, bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		for _, v := range bad {
			if strings.Contains(err.Error(), v) && v != "x" {
				t.Errorf("error echoes the value: %v", err)
			}
		}
	}
	if err := WriteEnvFile(filepath.Join(dir, "missing", "env"), vars); err == nil {
		t.Error("write into a missing directory succeeded")
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	s := Secrets{"ANTHROPIC_API_KEY": secretValue, "SHORT": "abc"}
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	logger.Info("env", "secrets", s, "any", any(s))
	js, err := json.Marshal(map[string]any{"env": s})
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{
		fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s %q %x %d", s, s, s, s, s, s, s), s.String(),
		fmt.Errorf("wrap: %v", s).Error(), logs.String(), string(js),
	} {
		if strings.Contains(out, "SECRET") {
			t.Errorf("value printed: %s", out)
		}
		if !strings.Contains(out, "ANTHROPIC_API_KEY") {
			t.Errorf("names missing: %s", out)
		}
	}
	red := s.Redact("token=" + secretValue + " again " + secretValue + " abc")
	if red != "token=[REDACTED:ANTHROPIC_API_KEY] again [REDACTED:ANTHROPIC_API_KEY] abc" {
		t.Errorf("Redact = %q", red)
	}
	overlap := Secrets{"LONG": "abcdefgh", "PART": "abcd"}
	if got := overlap.Redact("xabcdefghx abcd"); got != "x[REDACTED:LONG]x [REDACTED:PART]" {
		t.Errorf("Redact overlap = %q", got)
	}
	if got := (Secrets{}).Redact("plain"); got != "plain" {
		t.Errorf("empty Redact = %q", got)
	}
}

func TestEnvFileNotRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "env-fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := BuildEnvFile(context.Background(), fifo, nil, nil); !errors.Is(err, ErrEnvFile) {
		t.Errorf("fifo env file: %v", err)
	}
	if _, err := LoadAllowlist(fifo, Options{}); !errors.Is(err, ErrBadAllowlist) {
		t.Errorf("fifo allowlist: %v", err)
	}
}
