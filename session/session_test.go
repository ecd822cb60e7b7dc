package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/arizuko/arizukod/internal/agentdir"
	"github.com/arizuko/arizukod/memory"
	"gopkg.in/yaml.v3"
)

var (
	oldBundle = os.DirFS("testdata/bundles/old")
	newBundle = os.DirFS("testdata/bundles/new")
)

func seed(t *testing.T, dir string, skills fs.FS) error {
	t.Helper()
	return Seed(context.Background(), dir, Options{Folder: "main", Env: testEnv, Sidecars: testSidecars, Skills: skills})
}

// snapshot maps every file under dir (skipping nothing) to its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		m[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSeedFresh(t *testing.T) {
	dir := t.TempDir()
	if err := seed(t, dir, oldBundle); err != nil {
		t.Fatal(err)
	}
	got := snapshot(t, dir)
	want := []string{".claude.json", ".claude/settings.json", ".claude/skills/MIGRATION_VERSION", ".claude/skills/diary/SKILL.md", ".claude/skills/facts/SKILL.md"}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, want) {
		t.Fatalf("files %v, want %v", keys, want)
	}
	if got[".claude/skills/MIGRATION_VERSION"] != "1\n" {
		t.Errorf("version file %q", got[".claude/skills/MIGRATION_VERSION"])
	}
	for name, mode := range map[string]fs.FileMode{".claude/settings.json": 0o600, ".claude.json": 0o600, ".claude/skills/diary/SKILL.md": 0o644} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, %v; want %v", name, st.Mode().Perm(), err, mode)
		}
	}
	var cj map[string]any
	if err := json.Unmarshal([]byte(got[".claude.json"]), &cj); err != nil {
		t.Fatal(err)
	}
	if cj["userID"] != UserID("main") || cj["hasCompletedOnboarding"] != true {
		t.Errorf(".claude.json = %s", got[".claude.json"])
	}
	// Seeding again changes nothing and rewrites nothing.
	before := statAll(t, dir)
	if err := seed(t, dir, oldBundle); err != nil {
		t.Fatal(err)
	}
	if after := statAll(t, dir); !maps.Equal(before, after) {
		t.Errorf("second seed rewrote files:\n%v\n%v", before, after)
	}
}

// statAll maps files to inode and modification time.
func statAll(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for name := range snapshot(t, dir) {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		m[name] = fmt.Sprint(st.Sys().(*syscall.Stat_t).Ino, st.ModTime().UnixNano())
	}
	return m
}

func TestUserID(t *testing.T) {
	// sha256("arizuko:main"), as printf 'arizuko:main' | sha256sum prints it.
	if got, want := UserID("main"), "d15f2dbedc37a5f8dd767da91a2ad024b5ce0798fe540675e31882ae3ac00a45"; got != want {
		t.Fatalf("UserID(main) = %s, want %s", got, want)
	}
	if UserID("main") == UserID("main/research") {
		t.Fatal("two folders share a userID")
	}
}

// TestSeedKeepsOperatorFiles: existing skill files and .claude.json are never
// overwritten; a skill file deleted after seeding is not brought back.
func TestSeedKeepsOperatorFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, ".claude/skills/diary/SKILL.md", "operator's diary\n")
	write(t, dir, ".claude.json", "not even JSON")
	if err := seed(t, dir, oldBundle); err != nil {
		t.Fatal(err)
	}
	got := snapshot(t, dir)
	if got[".claude/skills/diary/SKILL.md"] != "operator's diary\n" || got[".claude.json"] != "not even JSON" {
		t.Fatalf("operator files overwritten: %q %q", got[".claude/skills/diary/SKILL.md"], got[".claude.json"])
	}
	if got[".claude/skills/facts/SKILL.md"] == "" {
		t.Fatal("missing skill file not seeded")
	}
	if err := os.Remove(filepath.Join(dir, ".claude/skills/facts/SKILL.md")); err != nil {
		t.Fatal(err)
	}
	if err := seed(t, dir, oldBundle); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".claude/skills/facts/SKILL.md")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("deleted skill came back: %v", err)
	}
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSettingsFile: an existing file keeps its mode and operator keys; a
// corrupt one is left untouched and named in the error.
func TestSettingsFile(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, ".claude/settings.json", `{"model":"x","env":{"MINE":"1"}}`)
	if err := os.Chmod(filepath.Join(dir, ".claude/settings.json"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := seed(t, dir, oldBundle); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, ".claude/settings.json"))
	if err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, %v; want 0640 kept", st.Mode().Perm(), err)
	}
	got := snapshot(t, dir)[".claude/settings.json"]
	if !strings.Contains(got, `"model": "x"`) || !strings.Contains(got, `"MINE": "1"`) {
		t.Fatalf("operator keys lost:\n%s", got)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".claude", ".*tmp*")); len(leftovers) > 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}

	corrupt := `{"permissions": {"deny": ["Bash"]},` // cut short by an editor
	write(t, dir, ".claude/settings.json", corrupt)
	err = seed(t, dir, oldBundle)
	if !errors.Is(err, ErrCorruptSettings) || !strings.Contains(err.Error(), filepath.Join(dir, ".claude/settings.json")) {
		t.Fatalf("err = %v, want ErrCorruptSettings naming the file", err)
	}
	if got := snapshot(t, dir)[".claude/settings.json"]; got != corrupt {
		t.Fatalf("corrupt file changed to %q", got)
	}
}

// TestSeedNoEscape: symlinks planted in the session cannot make Seed read or
// write outside it, and a FIFO cannot block it.
func TestSeedNoEscape(t *testing.T) {
	outside := t.TempDir()
	write(t, outside, "settings.json", `{"secret":"host"}`)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "settings.json"), filepath.Join(dir, ".claude/settings.json")); err != nil {
		t.Fatal(err)
	}
	if err := seed(t, dir, oldBundle); err == nil {
		t.Fatal("seeded through a symlink out of the session")
	}
	if got := snapshot(t, outside); got["settings.json"] != `{"secret":"host"}` || len(got) != 1 {
		t.Fatalf("outside directory changed: %v", got)
	}

	dir = t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, ".claude")); err != nil {
		t.Fatal(err)
	}
	if err := seed(t, dir, oldBundle); err == nil {
		t.Fatal("seeded through a .claude symlink out of the session")
	}
	if got := snapshot(t, outside); len(got) != 1 {
		t.Fatalf("outside directory changed: %v", got)
	}

	dir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, ".claude/settings.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- seed(t, dir, oldBundle) }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCorruptSettings) {
			t.Fatalf("FIFO settings.json: err = %v, want ErrCorruptSettings", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Seed blocked on a FIFO")
	}
}

func TestSeedOptions(t *testing.T) {
	dir := t.TempDir()
	if err := Seed(context.Background(), dir, Options{Skills: oldBundle}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("no folder: err = %v", err)
	}
	// Without bundled skills the settings and .claude.json are still seeded.
	if err := Seed(context.Background(), dir, Options{Folder: "main"}); err != nil {
		t.Errorf("no skills: err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".claude", "settings.json")); err != nil {
		t.Errorf("no skills: settings.json not written: %v", err)
	}
	if err := Seed(context.Background(), filepath.Join(dir, "missing"), Options{Folder: "main", Skills: oldBundle}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing session dir: err = %v", err)
	}
}

func TestSeedOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("ARIZUKO_REQUIRE_ENGINES") == "1" {
			t.Fatal("chown needs root, and the suite runs as root (ARIZUKO_REQUIRE_ENGINES=1)")
		}
		t.Skip("chown needs root")
	}
	dir := t.TempDir()
	if err := Seed(context.Background(), dir, Options{Folder: "main", Skills: oldBundle, Owner: &Owner{UID: 4242, GID: 4343}}); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if s := st.Sys().(*syscall.Stat_t); s.Uid != 4242 || s.Gid != 4343 {
			t.Errorf("%s owned by %d:%d", p, s.Uid, s.Gid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// logRecorder collects the messages of Info logs.
type logRecorder struct {
	msgs []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	if rec.Level == slog.LevelInfo {
		msg := rec.Message
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "migration" {
				msg += " " + a.Value.String()
			}
			return true
		})
		r.msgs = append(r.msgs, msg)
	}
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

func seedLogged(t *testing.T, dir string, skills fs.FS) ([]string, error) {
	t.Helper()
	rec := &logRecorder{}
	err := Seed(context.Background(), dir, Options{Folder: "main", Env: testEnv, Sidecars: testSidecars, Skills: skills, Logger: slog.New(rec)})
	return rec.msgs, err
}

// migrated is the session state after seeding the old bundle, adding an
// operator skill, editing two bundled ones and migrating to the new bundle.
func migratedState(t *testing.T) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	if err := seed(t, dir, oldBundle); err != nil {
		t.Fatal(err)
	}
	write(t, dir, ".claude/skills/custom/SKILL.md", "operator skill\n")
	write(t, dir, ".claude/skills/diary/SKILL.md", "operator edit, overwritten by 002\n")
	return dir, snapshot(t, dir)
}

func TestMigrations(t *testing.T) {
	dir, _ := migratedState(t)
	msgs, err := seedLogged(t, dir, newBundle)
	if err != nil {
		t.Fatal(err)
	}
	wantMsgs := []string{"session: skills migration applied 002-diary-rewrite.md", "session: skills migration applied 003-newskill-drop-facts.md"}
	if !slices.Equal(msgs, wantMsgs) {
		t.Fatalf("logs %q, want %q", msgs, wantMsgs)
	}
	got := snapshot(t, dir)
	skills := map[string]string{}
	for k, v := range got {
		if rest, ok := strings.CutPrefix(k, ".claude/skills/"); ok {
			skills[rest] = v
		}
	}
	want := map[string]string{
		"MIGRATION_VERSION":          "4\n",
		"custom/SKILL.md":            "operator skill\n",
		"diary/SKILL.md":             readFile(t, "testdata/bundles/new/diary/SKILL.md"),
		"newskill/SKILL.md":          readFile(t, "testdata/bundles/new/newskill/SKILL.md"),
		"newskill/scripts/helper.sh": readFile(t, "testdata/bundles/new/newskill/scripts/helper.sh"),
	}
	if !maps.Equal(skills, want) {
		t.Fatalf("skills after migration:\n%v\nwant\n%v", skills, want)
	}
	// Idempotent: nothing left to apply, nothing changes.
	msgs, err = seedLogged(t, dir, newBundle)
	if err != nil || len(msgs) != 0 || !maps.Equal(snapshot(t, dir), got) {
		t.Fatalf("second run: %v, logs %q", err, msgs)
	}
	// An older bundle (a downgraded daemon) leaves the newer skills alone.
	if _, err := seedLogged(t, dir, oldBundle); err != nil || !maps.Equal(snapshot(t, dir), got) {
		t.Fatalf("downgrade touched the skills: %v", err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// failingFS fails to read one path, like a crash in the middle of a migration.
type failingFS struct {
	fs.FS
	path string
}

func (f failingFS) Open(name string) (fs.File, error) {
	if name == f.path {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("simulated crash")}
	}
	return f.FS.Open(name)
}

// TestMigrationInterrupted: a migration that stops half-way leaves the
// version of the last complete one; the next seed finishes the job and ends in
// the same state as an uninterrupted run.
func TestMigrationInterrupted(t *testing.T) {
	ref, _ := migratedState(t)
	if err := seed(t, ref, newBundle); err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, ref)

	t.Run("error inside migration 003", func(t *testing.T) {
		dir, _ := migratedState(t)
		err := seed(t, dir, failingFS{newBundle, "newskill/scripts/helper.sh"})
		if err == nil || !strings.Contains(err.Error(), "003-newskill-drop-facts.md") {
			t.Fatalf("err = %v, want the failing migration named", err)
		}
		mid := snapshot(t, dir)
		if mid[".claude/skills/MIGRATION_VERSION"] != "2\n" || mid[".claude/skills/diary/SKILL.md"] != want[".claude/skills/diary/SKILL.md"] {
			t.Fatalf("after the failure: version %q, diary %q", mid[".claude/skills/MIGRATION_VERSION"], mid[".claude/skills/diary/SKILL.md"])
		}
		if err := seed(t, dir, newBundle); err != nil {
			t.Fatal(err)
		}
		if got := snapshot(t, dir); !maps.Equal(got, want) {
			t.Fatalf("resumed state differs:\n%v\nwant\n%v", got, want)
		}
	})

	t.Run("crash between writes and version bump", func(t *testing.T) {
		dir, _ := migratedState(t)
		b, err := loadBundle(newBundle)
		if err != nil {
			t.Fatal(err)
		}
		root, err := agentdir.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		tr := tree{root: root}
		// Migrations 002 and 003 wrote their files; the version file was bumped
		// to 2 only.
		for _, m := range b.migrations {
			if err := tr.applyMigration(newBundle, m); err != nil {
				t.Fatal(err)
			}
		}
		if err := tr.setVersion(2); err != nil {
			t.Fatal(err)
		}
		msgs, err := seedLogged(t, dir, newBundle)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 1 || !strings.HasSuffix(msgs[0], "003-newskill-drop-facts.md") {
			t.Fatalf("redone: %q, want only 003", msgs)
		}
		if got := snapshot(t, dir); !maps.Equal(got, want) {
			t.Fatalf("state after redo differs:\n%v\nwant\n%v", got, want)
		}
	})
}

func TestInstalledVersionCorrupt(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, ".claude/skills/MIGRATION_VERSION", "two\n")
	if err := seed(t, dir, newBundle); !errors.Is(err, ErrBadVersion) || !strings.Contains(err.Error(), "MIGRATION_VERSION") {
		t.Fatalf("err = %v, want ErrBadVersion naming the file", err)
	}
}

func TestLoadBundleErrors(t *testing.T) {
	skill := &fstest.MapFile{Data: []byte("---\nname: a\ndescription: b\n---\n")}
	mig := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	ok := "---\nfiles:\n  - a/SKILL.md\n---\n"
	for name, tc := range map[string]fstest.MapFS{
		"no version":           {"a/SKILL.md": skill},
		"version zero":         {"MIGRATION_VERSION": mig("0\n")},
		"version text":         {"MIGRATION_VERSION": mig("v2\n")},
		"number above version": {"MIGRATION_VERSION": mig("2"), "migrations/003-x.md": mig(ok)},
		"number one":           {"MIGRATION_VERSION": mig("2"), "migrations/001-x.md": mig(ok)},
		"two digits":           {"MIGRATION_VERSION": mig("2"), "migrations/02-x.md": mig(ok)},
		"no description":       {"MIGRATION_VERSION": mig("2"), "migrations/002.md": mig(ok)},
		"stray file":           {"MIGRATION_VERSION": mig("2"), "migrations/README.md": mig(ok)},
		"duplicate number":     {"MIGRATION_VERSION": mig("2"), "migrations/002-x.md": mig(ok), "migrations/0002-y.md": mig(ok)},
		"no frontmatter":       {"MIGRATION_VERSION": mig("2"), "migrations/002-x.md": mig("files: [a/SKILL.md]\n")},
		"unclosed frontmatter": {"MIGRATION_VERSION": mig("2"), "migrations/002-x.md": mig("---\nfiles: [a/SKILL.md]\n")},
		"unknown key":          {"MIGRATION_VERSION": mig("2"), "migrations/002-x.md": mig("---\nfile: [a/SKILL.md]\n---\n")},
		"empty files":          {"MIGRATION_VERSION": mig("2"), "migrations/002-x.md": mig("---\nfiles: []\n---\n")},
		"escaping path":        {"MIGRATION_VERSION": mig("2"), "migrations/002-x.md": mig("---\nfiles: [../x/SKILL.md]\n---\n")},
		"absolute path":        {"MIGRATION_VERSION": mig("2"), "migrations/002-x.md": mig("---\nfiles: [/etc/passwd]\n---\n")},
		"top-level path":       {"MIGRATION_VERSION": mig("2"), "migrations/002-x.md": mig("---\nfiles: [MIGRATION_VERSION]\n---\n")},
		"path into migrations": {"MIGRATION_VERSION": mig("2"), "migrations/002-x.md": mig("---\nfiles: [migrations/002-x.md]\n---\n")},
		"unclean path":         {"MIGRATION_VERSION": mig("2"), "migrations/002-x.md": mig("---\nfiles: [a//SKILL.md]\n---\n")},
		"files not a list":     {"MIGRATION_VERSION": mig("2"), "migrations/002-x.md": mig("---\nfiles: a/SKILL.md\n---\n")},
	} {
		if _, err := loadBundle(tc); !errors.Is(err, ErrBadBundle) {
			t.Errorf("%s: err = %v, want ErrBadBundle", name, err)
		}
	}
	good := fstest.MapFS{"MIGRATION_VERSION": mig("12\n"), "migrations/012-x.md": mig(ok), "migrations/002-y.md": mig(ok)}
	b, err := loadBundle(good)
	if err != nil || b.version != 12 || len(b.migrations) != 2 || b.migrations[0].number != 2 {
		t.Fatalf("good bundle: %+v, %v", b, err)
	}
}

// TestBundledSkills checks the real tree in container/skills: a valid bundle
// with the five built-in skills in Claude Code's format.
func TestBundledSkills(t *testing.T) {
	bundled := os.DirFS("../container/skills")
	b, err := loadBundle(bundled)
	if err != nil {
		t.Fatal(err)
	}
	if b.version < 1 {
		t.Fatalf("version %d", b.version)
	}
	ents, err := fs.ReadDir(bundled, ".")
	if err != nil {
		t.Fatal(err)
	}
	var skills []string
	for _, e := range ents {
		if !e.IsDir() || e.Name() == migrationsDir {
			continue
		}
		skills = append(skills, e.Name())
		data, err := fs.ReadFile(bundled, e.Name()+"/SKILL.md")
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.SplitN(string(data), "---\n", 3)
		if len(parts) != 3 || parts[0] != "" {
			t.Fatalf("%s/SKILL.md: no frontmatter", e.Name())
		}
		var fm struct {
			Name        string `yaml:"name"`
			Description string `yaml:"description"`
		}
		dec := yaml.NewDecoder(strings.NewReader(parts[1]))
		dec.KnownFields(true)
		if err := dec.Decode(&fm); err != nil {
			t.Fatalf("%s/SKILL.md: %v", e.Name(), err)
		}
		if fm.Name != e.Name() || !regexp.MustCompile(`^[a-z0-9-]{1,64}$`).MatchString(fm.Name) {
			t.Errorf("%s/SKILL.md: name %q", e.Name(), fm.Name)
		}
		if fm.Description == "" || len(fm.Description) > 1024 {
			t.Errorf("%s/SKILL.md: description of %d bytes", e.Name(), len(fm.Description))
		}
		if len(strings.TrimSpace(parts[2])) < 200 {
			t.Errorf("%s/SKILL.md: instructions too short", e.Name())
		}
	}
	if want := []string{"compact-memories", "diary", "facts", "recall-memories", "users"}; !slices.Equal(skills, want) {
		t.Fatalf("skills %v, want %v", skills, want)
	}
	dir := t.TempDir()
	if err := seed(t, dir, bundled); err != nil {
		t.Fatal(err)
	}
}

// TestUsersSkillEncoding runs the shell function the users skill gives the
// agent and compares it with memory.EncodeJID, the encoding arizukod reads.
func TestUsersSkillEncoding(t *testing.T) {
	for _, tool := range []string{"sh", "od", "awk"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("ARIZUKO_REQUIRE_ENGINES") == "1" {
				t.Fatalf("%s not installed (ARIZUKO_REQUIRE_ENGINES=1)", tool)
			}
			t.Skipf("%s not installed", tool)
		}
	}
	doc := readFile(t, "../container/skills/users/SKILL.md")
	fn := regexp.MustCompile(`(?s)\njidfile\(\) \{\n.*?\n\}\n`).FindString(doc)
	if fn == "" {
		t.Fatal("no jidfile function in users/SKILL.md")
	}
	for _, jid := range []string{"telegram:123456", "matrix:@alice:example.org", "whatsapp:Bob/1", "100% sure", "a.b_c-d", "ünï ✓", "x\ty"} {
		out, err := exec.Command("sh", "-c", fn+`jidfile "$1"`, "sh", jid).Output()
		if err != nil {
			t.Fatal(err)
		}
		stem, err := memory.EncodeJID(jid)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); got != stem+".md" {
			t.Errorf("jidfile %q = %q, memory.EncodeJID gives %q", jid, got, stem+".md")
		}
	}
	for _, ex := range regexp.MustCompile("\\| `([^`]+)` \\| `users/([^`]+)\\.md` \\|").FindAllStringSubmatch(doc, -1) {
		if stem, err := memory.EncodeJID(ex[1]); err != nil || stem != ex[2] {
			t.Errorf("users/SKILL.md example %s -> %s, EncodeJID gives %s (%v)", ex[1], ex[2], stem, err)
		}
	}
	if !bytes.Contains([]byte(doc), []byte("users/telegram%3A123456.md")) {
		t.Error("example table missing")
	}
}

func FuzzParseMigration(f *testing.F) {
	for _, s := range []string{"---\nfiles:\n  - a/SKILL.md\n---\n", "---\r\nfiles: [a/b, c/d]\r\n---\r\n", "---\nfiles: x\n---", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		files, err := parseMigration(data)
		if err != nil {
			return
		}
		for _, p := range files {
			if !fs.ValidPath(p) || !strings.Contains(p, "/") || strings.HasPrefix(p, migrationsDir+"/") {
				t.Fatalf("accepted path %q", p)
			}
		}
	})
}
