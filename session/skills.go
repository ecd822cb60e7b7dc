package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

const (
	// VersionFile is the name of the version file, in the bundle and in the
	// session's skills directory.
	VersionFile   = "MIGRATION_VERSION"
	migrationsDir = "migrations"
	skillsDir     = ".claude/skills"
)

var (
	// ErrBadBundle is wrapped when the bundled skills tree breaks the format.
	ErrBadBundle = errors.New("invalid skills bundle")
	// ErrBadVersion is wrapped when a session's installed version file is not
	// a non-negative integer.
	ErrBadVersion = errors.New("invalid installed skills version")
)

var migrationName = regexp.MustCompile(`^([0-9]{3,})-[A-Za-z0-9][A-Za-z0-9._-]*\.md$`)

type bundle struct {
	version    int
	migrations []migration // ascending numbers
}

type migration struct {
	number int
	name   string
	files  []string // relative to the skills directory
}

// loadBundle reads and checks MIGRATION_VERSION and every migration of a
// bundled skills tree.
func loadBundle(fsys fs.FS) (bundle, error) {
	raw, err := fs.ReadFile(fsys, VersionFile)
	if err != nil {
		return bundle{}, fmt.Errorf("%w: %w", ErrBadBundle, err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || v < 1 {
		return bundle{}, fmt.Errorf("%w: %s is %q, want a positive integer", ErrBadBundle, VersionFile, bytes.TrimSpace(raw))
	}
	b := bundle{version: v}
	ents, err := fs.ReadDir(fsys, migrationsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return b, nil
	}
	if err != nil {
		return bundle{}, fmt.Errorf("%w: %w", ErrBadBundle, err)
	}
	seen := map[int]string{}
	for _, e := range ents {
		p := migrationsDir + "/" + e.Name()
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			return bundle{}, fmt.Errorf("%w: %s: migrations are files named NNN-description.md", ErrBadBundle, p)
		}
		n, err := strconv.Atoi(m[1])
		if err != nil || n < 2 || n > v {
			return bundle{}, fmt.Errorf("%w: %s: number must be between 2 and %s (%d)", ErrBadBundle, p, VersionFile, v)
		}
		if other, dup := seen[n]; dup {
			return bundle{}, fmt.Errorf("%w: %s: number %d is also used by %s", ErrBadBundle, p, n, other)
		}
		seen[n] = e.Name()
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return bundle{}, fmt.Errorf("%w: %w", ErrBadBundle, err)
		}
		files, err := parseMigration(data)
		if err != nil {
			return bundle{}, fmt.Errorf("%w: %s: %w", ErrBadBundle, p, err)
		}
		b.migrations = append(b.migrations, migration{number: n, name: e.Name(), files: files})
	}
	slices.SortFunc(b.migrations, func(x, y migration) int { return x.number - y.number })
	return b, nil
}

// parseMigration reads the frontmatter of a migration: exactly the key files,
// a non-empty list of slash-separated paths inside a skill directory.
func parseMigration(data []byte) ([]string, error) {
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	if strings.TrimRight(lines[0], " \t") != "---" {
		return nil, errors.New("must start with a --- frontmatter line")
	}
	end := slices.IndexFunc(lines[1:], func(l string) bool { return strings.TrimRight(l, " \t") == "---" })
	if end < 0 {
		return nil, errors.New("frontmatter not closed by a --- line")
	}
	var fm struct {
		Files []string `yaml:"files"`
	}
	dec := yaml.NewDecoder(strings.NewReader(strings.Join(lines[1:end+1], "\n")))
	dec.KnownFields(true)
	if err := dec.Decode(&fm); err != nil {
		return nil, fmt.Errorf("frontmatter: %w", err)
	}
	if len(fm.Files) == 0 {
		return nil, errors.New("frontmatter: files: must list at least one path")
	}
	for _, f := range fm.Files {
		top, _, nested := strings.Cut(f, "/")
		if !fs.ValidPath(f) || !nested || top == migrationsDir {
			return nil, fmt.Errorf("frontmatter: files: %q must be a clean relative path inside a skill directory", f)
		}
	}
	return fm.Files, nil
}

// seedSkills seeds the bundled tree on first use and applies pending
// migrations (see the package documentation).
func (t tree) seedSkills(ctx context.Context, bundled fs.FS, log *slog.Logger) error {
	b, err := loadBundle(bundled)
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	if err := t.mkdirAll(skillsDir); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	installed, ok, err := t.installedVersion()
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	if !ok {
		if err := t.copySkills(ctx, bundled, log); err != nil {
			return fmt.Errorf("session: seed skills: %w", err)
		}
		log.Info("session: skills seeded", "dir", t.path(skillsDir), "version", b.version)
		return t.setVersion(b.version)
	}
	if installed >= b.version {
		if installed > b.version {
			log.Warn("session: installed skills are newer than the bundle; left alone", "dir", t.path(skillsDir), "installed", installed, "bundled", b.version)
		}
		return nil
	}
	cur := installed
	for _, m := range b.migrations {
		if m.number <= installed {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := t.applyMigration(bundled, m); err != nil {
			return fmt.Errorf("session: migration %s: %w", m.name, err)
		}
		if err := t.setVersion(m.number); err != nil {
			return err
		}
		cur = m.number
		log.Info("session: skills migration applied", "dir", t.path(skillsDir), "migration", m.name)
	}
	if cur < b.version {
		return t.setVersion(b.version)
	}
	return nil
}

// copySkills copies every top-level directory of the bundle except
// migrations/, creating only files that do not exist.
func (t tree) copySkills(ctx context.Context, bundled fs.FS, log *slog.Logger) error {
	tops, err := fs.ReadDir(bundled, ".")
	if err != nil {
		return err
	}
	for _, top := range tops {
		if !top.IsDir() || top.Name() == migrationsDir || strings.HasPrefix(top.Name(), ".") {
			continue
		}
		err := fs.WalkDir(bundled, top.Name(), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			dst := skillsDir + "/" + p
			if d.IsDir() {
				return t.mkdirAll(dst)
			}
			data, err := fs.ReadFile(bundled, p)
			if err != nil {
				return err
			}
			created, err := t.createIfMissing(dst, data, skillMode)
			if err == nil && !created {
				log.Debug("session: kept existing skill file", "path", t.path(dst))
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// applyMigration makes each listed path equal to the bundle: written when the
// bundle has it, removed when it does not.
func (t tree) applyMigration(bundled fs.FS, m migration) error {
	for _, f := range m.files {
		dst := skillsDir + "/" + f
		data, err := fs.ReadFile(bundled, f)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := t.root.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove %s: %w", t.path(dst), err)
			}
		case err != nil:
			return fmt.Errorf("bundled %s: %w", f, err)
		default:
			if err := t.mkdirAll(path.Dir(dst)); err != nil {
				return err
			}
			if err := t.writeAtomic(dst, data, skillMode); err != nil {
				return err
			}
		}
	}
	return nil
}

// installedVersion reads .claude/skills/MIGRATION_VERSION; ok is false when
// there is none (the skills were never seeded).
func (t tree) installedVersion() (int, bool, error) {
	name := skillsDir + "/" + VersionFile
	raw, _, err := t.readRegular(name)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("%w: %s: %w", ErrBadVersion, t.path(name), err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || v < 0 {
		return 0, false, fmt.Errorf("%w: %s holds %q, want a non-negative integer (delete it to re-seed the skills)", ErrBadVersion, t.path(name), bytes.TrimSpace(raw))
	}
	return v, true, nil
}

func (t tree) setVersion(v int) error {
	if err := t.writeAtomic(skillsDir+"/"+VersionFile, []byte(strconv.Itoa(v)+"\n"), skillMode); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	return nil
}
