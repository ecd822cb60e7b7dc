package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/arizuko/arizukod/internal/agentdir"
)

// Defaults and limits. A turn's whole stdin line (the contract's JSON Input,
// systemPrompt included) must stay under 1 MiB; the runner enforces that. The
// prompt Assemble returns is at most MaxTotalCap bytes and, because its content
// is escaped and sanitised, its JSON string encoding (encoding/json, HTML
// escaping on or off) is at most MaxPromptJSON bytes, which leaves the rest of
// the line for messages, grants and the other fields.
const (
	DefaultDiaryMax    = 14
	DefaultEpisodesMax = 5
	DefaultLayerCap    = 64 << 10             // bytes per layer
	MaxTotalCap        = 256 << 10            // bytes for all layers: the default and the upper bound of Options.TotalCap
	MaxPromptJSON      = MaxTotalCap*9/4 + 2  // bytes of json.Marshal(prompt), quotes included
	maxSummary         = 4 << 10              // bytes of one escaped summary
	closeTag           = "</knowledge>\n"     // ends every block
	dateLen            = len("2006-01-02")    // length of a date in names and frontmatter
	diaryNameLen       = len("2006-01-02.md") // length of a diary file name
	secondsPerDay      = int64(24 * time.Hour / time.Second)
)

// ErrInvalidOptions is wrapped when Options hold a value Assemble refuses.
var ErrInvalidOptions = errors.New("invalid memory options")

var errNotRegular = errors.New("not a regular file")

// Options control Assemble. The zero value is usable.
type Options struct {
	Now         time.Time      // the turn's time; zero means time.Now()
	Location    *time.Location // time zone that decides which calendar day Now is; nil means time.Local
	Sender      string         // JID of the message's sender; "" means no user layer
	DiaryMax    int            // diary files considered; 0 means DefaultDiaryMax
	EpisodesMax int            // episodes considered; 0 means DefaultEpisodesMax
	LayerCap    int            // bytes per layer; 0 means DefaultLayerCap
	TotalCap    int            // bytes for all layers; 0 means MaxTotalCap, larger is an error
	Logger      *slog.Logger   // debug logs for skipped files; nil discards them
}

func (o Options) normalize() (Options, error) {
	for _, f := range []struct {
		name string
		v    int
	}{{"DiaryMax", o.DiaryMax}, {"EpisodesMax", o.EpisodesMax}, {"LayerCap", o.LayerCap}, {"TotalCap", o.TotalCap}} {
		if f.v < 0 {
			return o, fmt.Errorf("%w: %s is %d, must not be negative", ErrInvalidOptions, f.name, f.v)
		}
	}
	if o.TotalCap > MaxTotalCap {
		return o, fmt.Errorf("%w: TotalCap is %d, must be at most MaxTotalCap (%d)", ErrInvalidOptions, o.TotalCap, MaxTotalCap)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.Location == nil {
		o.Location = time.Local
	}
	o.DiaryMax = cmpOr(o.DiaryMax, DefaultDiaryMax)
	o.EpisodesMax = cmpOr(o.EpisodesMax, DefaultEpisodesMax)
	o.LayerCap = cmpOr(o.LayerCap, DefaultLayerCap)
	o.TotalCap = cmpOr(o.TotalCap, MaxTotalCap)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Assemble returns the memory part of the system prompt of a turn of the group
// whose directory is groupDir: the diary, episodes, facts and user layers, in
// that order, each present only when it has something to say (so the result is
// "" for a group without memory files). The format is described in README.md.
//
// The group directory is the agent's ground: it is read through its descriptor
// (agentdir), and no symlink in it is followed, whether it leads out or stays inside. Files that cannot be used (no frontmatter, no summary, not a regular file,
// unreadable) are skipped with a debug log; an unreadable layer directory means
// no layer (logged as a warning). The error is non-nil only when groupDir cannot
// be opened, Options are invalid or ctx is done.
func Assemble(ctx context.Context, groupDir string, opt Options) (string, error) {
	dir, err := agentdir.Open(groupDir)
	if err != nil {
		return "", fmt.Errorf("memory: open group directory: %w", err)
	}
	defer dir.Close()
	return AssembleDir(ctx, dir, opt)
}

// AssembleDir is Assemble over the group directory the caller opened (the daemon opens a
// group's directory through its parents' descriptors, which an ancestor's agent can
// write).
func AssembleDir(ctx context.Context, dir *agentdir.Dir, opt Options) (string, error) {
	return assembleFS(ctx, rootFS{dir}, opt)
}

// assembleFS is Assemble over a file system rooted at the group directory
// (the seam tests count opened files through). It trusts fsys: opening a file
// must not block and fsys must confine paths itself, as rootFS does.
func assembleFS(ctx context.Context, fsys fs.FS, opt Options) (string, error) {
	opt, err := opt.normalize()
	if err != nil {
		return "", err
	}
	now := opt.Now.In(opt.Location)
	a := &assembler{
		ctx:   ctx,
		fsys:  fsys,
		opt:   opt,
		log:   opt.Logger,
		today: time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC).Unix() / secondsPerDay,
	}
	for _, layer := range []func(budget int) error{a.diary, a.episodes, a.facts, a.user} {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if err := layer(min(opt.LayerCap, opt.TotalCap-len(a.out))); err != nil {
			return "", err
		}
	}
	return string(a.out), nil
}

type assembler struct {
	ctx   context.Context
	fsys  fs.FS
	opt   Options
	log   *slog.Logger
	today int64  // days since 1970-01-01 of Now in Location
	out   []byte // the prompt so far
	buf   []byte // scratch for reading files
}

// entry is one diary or episode line.
type entry struct {
	days    int64  // age in days
	date    string // YYYY-MM-DD
	file    string // episode file name; "" for diary entries
	summary string
}

func (a *assembler) diary(budget int) error {
	window, full := a.recentDiary()
	if !full {
		names, ok := a.unsorted("diary")
		if !ok {
			return nil
		}
		window = a.diaryWindow(names)
	}
	var entries []entry
	for _, name := range window {
		day, _ := parseDay(name[:dateLen])
		p := "diary/" + name
		if err := a.ctx.Err(); err != nil {
			return err
		}
		m, err := a.readMeta(p)
		if err != nil {
			a.log.Debug("memory: skipped file", "path", p, "err", err)
			continue
		}
		if m.summary == "" {
			a.log.Debug("memory: skipped file without summary", "path", p)
			continue
		}
		entries = append(entries, entry{days: a.today - day, date: name[:dateLen], summary: m.summary})
	}
	a.entryLayer("diary", entries, budget)
	return nil
}

// maxDiaryProbe is how many days back from today recentDiary looks for diary files by
// name before the directory is listed.
const maxDiaryProbe = 62

// recentDiary finds the diary window by the names its files must have: a diary name is
// exactly a date, so looking up today, yesterday and so on finds the newest files in date
// order without listing a directory of thousands. full is false when fewer than
// DiaryMax turn up within maxDiaryProbe days: then the directory is listed.
func (a *assembler) recentDiary() (window []string, full bool) {
	stat := a.statIn("diary")
	defer stat.close()
	for back := int64(0); back < maxDiaryProbe && len(window) < a.opt.DiaryMax; back++ {
		name := time.Unix((a.today-back)*secondsPerDay, 0).UTC().Format(time.DateOnly) + ".md"
		switch _, err := stat.lstat(name); {
		case err == nil:
			window = append(window, name)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, false // the listing says what is wrong
		}
	}
	return window, len(window) == a.opt.DiaryMax
}

// diaryWindow picks the newest DiaryMax diary names of a listing: dated names all have the
// same shape, so name order is date order.
func (a *assembler) diaryWindow(names []string) []string {
	return newest(names, a.opt.DiaryMax, func(name string) bool {
		if len(name) != diaryNameLen || !strings.HasSuffix(name, ".md") {
			return false
		}
		day, ok := parseDay(name[:dateLen])
		if ok && day > a.today {
			a.log.Debug("memory: skipped file dated in the future", "path", "diary/"+name)
		}
		return ok && day <= a.today
	})
}

// episodes picks the EpisodesMax most recent episodes by date. A name that
// starts with YYYY-MM-DD gives the date without opening the file, and name
// order is date order among such names, so only the window is read. A name
// without a date costs a frontmatter read to learn its date: that is the one
// case where a file is read but not injected.
func (a *assembler) episodes(budget int) error {
	names, ok := a.unsorted("episodes")
	if !ok {
		return nil
	}
	var cands []entry
	var withDate, undated []string
	for _, name := range names {
		switch _, ok := nameDay(name); {
		case !strings.HasSuffix(name, ".md") || strings.HasPrefix(name, "."):
		case ok:
			withDate = append(withDate, name)
		default:
			undated = append(undated, name)
		}
	}
	dated := newest(withDate, a.opt.EpisodesMax, func(name string) bool {
		day, _ := nameDay(name)
		if day > a.today {
			a.log.Debug("memory: skipped file dated in the future", "path", "episodes/"+name)
		}
		return day <= a.today
	})
	for _, name := range dated {
		day, _ := nameDay(name)
		cands = append(cands, entry{days: a.today - day, date: name[:dateLen], file: name})
	}
	stat := a.statIn("episodes")
	defer stat.close()
	for _, name := range undated {
		p := "episodes/" + name
		if err := a.ctx.Err(); err != nil {
			return err
		}
		m, err := a.cachedReadMeta(stat, name, p)
		if err != nil {
			a.log.Debug("memory: skipped file", "path", p, "err", err)
			continue
		}
		day, date, ok := metaDay(m.date)
		switch {
		case !ok:
			a.log.Debug("memory: skipped episode without a date in its name or frontmatter", "path", p, "date", m.date)
		case m.summary == "":
			a.log.Debug("memory: skipped file without summary", "path", p)
		case day > a.today:
			a.log.Debug("memory: skipped file dated in the future", "path", p)
		default:
			cands = append(cands, entry{days: a.today - day, date: date, file: name, summary: m.summary})
		}
	}
	slices.SortFunc(cands, func(x, y entry) int {
		return cmp.Or(cmp.Compare(x.days, y.days), strings.Compare(y.file, x.file))
	})
	cands = cands[:min(len(cands), a.opt.EpisodesMax)]
	entries := cands[:0]
	for _, c := range cands {
		if c.summary == "" {
			if err := a.ctx.Err(); err != nil {
				return err
			}
			p := "episodes/" + c.file
			m, err := a.readMeta(p)
			if err != nil {
				a.log.Debug("memory: skipped file", "path", p, "err", err)
				continue
			}
			if m.summary == "" {
				a.log.Debug("memory: skipped file without summary", "path", p)
				continue
			}
			c.summary = m.summary
		}
		entries = append(entries, c)
	}
	a.entryLayer("episodes", entries, budget)
	return nil
}

// facts injects every facts/*.md file (dot files and directories excluded)
// whole, in name order, one block each, until the layer budget runs out.
func (a *assembler) facts(budget int) error {
	all, ok := a.list("facts")
	if !ok {
		return nil
	}
	names := slices.DeleteFunc(all, func(n string) bool { return !strings.HasSuffix(n, ".md") || strings.HasPrefix(n, ".") })
	if len(names) > 0 && budget < markerReserve {
		a.log.Warn("memory: layer dropped: no room left under the caps", "layer", "facts")
		return nil
	}
	start := len(a.out)
	for i, name := range names {
		if err := a.ctx.Err(); err != nil {
			return err
		}
		open := appendAttr([]byte(`<knowledge layer="facts"`), "file", name)
		open = append(open, ">\n"...)
		// Keep room for this block's marker and for the line that counts the
		// files left out after it.
		room := budget - (len(a.out) - start) - len(open) - len("\n") - markerReserve - len(closeTag) - markerReserve
		if room < 0 {
			a.omitFiles(names[i:])
			break
		}
		truncated, err := a.fileBlock(open, "facts/"+name, room)
		if err != nil {
			a.log.Debug("memory: skipped file", "path", "facts/"+name, "err", err)
			continue
		}
		if truncated {
			a.omitFiles(names[i+1:])
			break
		}
	}
	return nil
}

// omitFiles appends one marker line for facts files left out entirely; their
// sizes come from stat, their content is not read.
func (a *assembler) omitFiles(names []string) {
	if len(names) == 0 {
		return
	}
	var size int64
	for _, n := range names {
		if st, err := fs.Stat(a.fsys, "facts/"+n); err == nil && st.Mode().IsRegular() {
			size += st.Size()
		}
	}
	a.out = appendMarker(a.out, size)
	a.out = fmt.Appendf(a.out, " (%d more files in facts/)\n", len(names))
	a.log.Warn("memory: facts layer truncated", "files_omitted", len(names), "bytes_omitted", size)
}

func (a *assembler) user(budget int) error {
	if a.opt.Sender == "" {
		return nil
	}
	names := userFiles(a.opt.Sender)
	if len(names) == 0 {
		a.log.Warn("memory: no user layer: the sender's JID names no file in users/", "jid", a.opt.Sender,
			"reason", "its literal name is not a file name and its encoded one is too long")
		return nil
	}
	open := appendAttr([]byte(`<knowledge layer="user"`), "jid", a.opt.Sender)
	open = append(open, ">\n"...)
	room := budget - len(open) - len("\n") - markerReserve - len(closeTag)
	for _, name := range names {
		p := "users/" + name
		if room < 0 {
			a.log.Warn("memory: user file skipped: no room left under the caps", "path", p)
			return nil
		}
		_, err := a.fileBlock(open, p, room)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, fs.ErrNotExist):
			continue
		}
		a.log.Warn("memory: user file skipped", "path", p, "reason", err)
	}
	return nil
}

// userFiles are the names in users/ of a sender's file, in the order they are looked
// up: the JID as it is (users/telegram:123456.md, as seeds and gateways write them),
// when it is a file name, then its encoding (EncodeJID: users/telegram%3A123456.md),
// when that differs and is valid.
func userFiles(jid string) []string {
	var names []string
	if len(jid)+len(".md") <= 255 && jid != "." && jid != ".." && !strings.ContainsAny(jid, "/\x00") {
		names = append(names, jid+".md")
	}
	if stem, err := EncodeJID(jid); err == nil && stem != jid {
		names = append(names, stem+".md")
	}
	return names
}

// fileBlock appends open, the escaped content of the file at p cut to room
// bytes, a newline if the content lacks one, a marker if it was cut, and the
// close tag. Nothing is appended when the file cannot be read.
func (a *assembler) fileBlock(open []byte, p string, room int) (truncated bool, err error) {
	f, st, err := a.openRegular(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	// Output never shrinks below half the input ("\r\n" -> "\n"), so 2*room
	// input bytes are enough to fill room output bytes.
	limit := 2*room + 2
	if cap(a.buf) < limit {
		a.buf = make([]byte, limit)
	}
	n, err := io.ReadFull(f, a.buf[:limit])
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return false, err
	}
	total := int64(n)
	if n == limit {
		total = max(total, st.Size())
	}
	a.out = append(a.out, open...)
	body := len(a.out)
	var used int
	a.out, used = appendEscaped(a.out, string(a.buf[:n]), room, false)
	if len(a.out) > body && a.out[len(a.out)-1] != '\n' {
		a.out = append(a.out, '\n')
	}
	if int64(used) < total {
		a.out = appendMarker(a.out, total-int64(used))
		a.out = append(a.out, '\n')
		truncated = true
	}
	a.out = append(a.out, closeTag...)
	return truncated, nil
}

// entryLayer appends a diary or episodes block: entries newest first, whole,
// as many as fit the budget, then a marker counting the summary bytes of the
// entries left out.
func (a *assembler) entryLayer(layer string, entries []entry, budget int) {
	if len(entries) == 0 {
		return
	}
	start := len(a.out)
	a.out = append(a.out, `<knowledge layer="`...)
	a.out = append(a.out, layer...)
	a.out = append(a.out, "\">\n"...)
	if len(a.out)-start+markerReserve+len(closeTag) > budget {
		a.out = a.out[:start]
		a.log.Warn("memory: layer dropped: no room left under the caps", "layer", layer)
		return
	}
	var omitted int64
	for i, e := range entries {
		mark := len(a.out)
		a.out = append(a.out, "<entry"...)
		a.out = appendAttr(a.out, "age", age(e.days))
		a.out = appendAttr(a.out, "date", e.date)
		if e.file != "" {
			a.out = appendAttr(a.out, "file", e.file)
		}
		a.out = append(a.out, '>')
		var used int
		a.out, used = appendEscaped(a.out, e.summary, maxSummary, false)
		if used < len(e.summary) {
			a.out = append(a.out, ' ')
			a.out = appendMarker(a.out, int64(len(e.summary)-used))
		}
		a.out = append(a.out, "</entry>\n"...)
		if len(a.out)-start+markerReserve+len(closeTag) > budget {
			a.out = a.out[:mark]
			for _, r := range entries[i:] {
				omitted += int64(len(r.summary))
			}
			a.log.Warn("memory: layer truncated", "layer", layer, "entries_omitted", len(entries)-i)
			break
		}
	}
	if omitted > 0 {
		a.out = appendMarker(a.out, omitted)
		a.out = append(a.out, '\n')
	}
	a.out = append(a.out, closeTag...)
}

// list returns the names in a layer directory in byte order; false when
// there is no such directory or it cannot be read. It lists names only (an
// *os.File's Readdirnames): file types are learnt when a file is opened, so a
// file system without d_type costs no stat per entry.
func (a *assembler) list(dir string) ([]string, bool) {
	names, err := a.names(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			a.log.Warn("memory: layer skipped: directory unreadable", "dir", dir, "err", err)
		}
		return nil, false
	}
	slices.Sort(names)
	return names, true
}

// unsorted is list without the sort, for the layers that pick a window of names.
func (a *assembler) unsorted(dir string) ([]string, bool) {
	names, err := a.names(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			a.log.Warn("memory: layer skipped: directory unreadable", "dir", dir, "err", err)
		}
		return nil, false
	}
	return names, true
}

// newest returns the k greatest of names that keep accepts, greatest first, without
// sorting them all: keep sees every name greater than the k-th greatest kept so far.
func newest(names []string, k int, keep func(string) bool) []string {
	top := make([]string, 0, k+1)
	for _, n := range names {
		if len(top) == k && (k == 0 || n <= top[k-1]) {
			continue
		}
		if !keep(n) {
			continue
		}
		i, _ := slices.BinarySearchFunc(top, n, func(x, y string) int { return strings.Compare(y, x) })
		top = slices.Insert(top, i, n)
		top = top[:min(len(top), k)]
	}
	return top
}

func (a *assembler) names(dir string) ([]string, error) {
	f, err := a.fsys.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	switch d := f.(type) {
	case interface{ Readdirnames(n int) ([]string, error) }:
		return d.Readdirnames(-1)
	case fs.ReadDirFile:
		ents, err := d.ReadDir(-1)
		names := make([]string, len(ents))
		for i, e := range ents {
			names[i] = e.Name()
		}
		return names, err
	}
	return nil, &fs.PathError{Op: "readdir", Path: dir, Err: errors.New("not a directory")}
}

func (a *assembler) openRegular(p string) (fs.File, fs.FileInfo, error) {
	f, err := a.fsys.Open(p)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%w (%s)", errNotRegular, st.Mode().Type())
	}
	return f, st, nil
}

func (a *assembler) readMeta(p string) (meta, error) {
	f, _, err := a.openRegular(p)
	if err != nil {
		return meta{}, err
	}
	defer f.Close()
	m, buf, err := readMeta(f, a.buf)
	a.buf = buf
	return m, err
}

// age labels a number of days: today, yesterday, N days ago (2-6), 1 week ago
// (7-13), N weeks ago (N = days/7).
func age(days int64) string {
	switch {
	case days == 0:
		return "today"
	case days == 1:
		return "yesterday"
	case days < 7:
		return fmt.Sprintf("%d days ago", days)
	case days < 14:
		return "1 week ago"
	}
	return fmt.Sprintf("%d weeks ago", days/7)
}

// parseDay parses YYYY-MM-DD (a real calendar date) into days since 1970-01-01.
func parseDay(s string) (int64, bool) {
	if len(s) != dateLen || s[4] != '-' || s[7] != '-' {
		return 0, false
	}
	y, ok1 := atoi(s[0:4])
	m, ok2 := atoi(s[5:7])
	d, ok3 := atoi(s[8:10])
	if !ok1 || !ok2 || !ok3 || m < 1 || m > 12 || d < 1 {
		return 0, false
	}
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	if t.Day() != d {
		return 0, false
	}
	return t.Unix() / secondsPerDay, true
}

func atoi(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// nameDay returns the date an episode file name starts with: YYYY-MM-DD
// followed by ".md" or by anything that is not a digit.
func nameDay(name string) (int64, bool) {
	if len(name) < dateLen+len(".md") {
		return 0, false
	}
	if c := name[dateLen]; c >= '0' && c <= '9' {
		return 0, false
	}
	return parseDay(name[:dateLen])
}

// metaDay reads a frontmatter date: YYYY-MM-DD, optionally followed by a time
// ("2024-01-15T10:30:00Z", "2024-01-15 10:30"); the date is taken as written.
func metaDay(v string) (int64, string, bool) {
	if len(v) < dateLen || len(v) > dateLen && !strings.ContainsRune("Tt ", rune(v[dateLen])) {
		return 0, "", false
	}
	day, ok := parseDay(v[:dateLen])
	return day, v[:dateLen], ok
}
