package quadlet

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
)

// Container is the typed view of a .container unit.
//
// [Container] fields hold the values podman finally receives. The generator copies
// them unescaped into the service's ExecStart= line, where systemd resolves
// %-specifiers and $-variables; so reading a unit turns "%%" into '%' and "$$" into
// '$' and refuses specifiers (%h, %N, ...) and variable references ($NAME as a word,
// ${NAME}) with ErrUnitContext, and rendering writes every '%' as "%%" and every '$'
// as "$$". Each field is read the way the generator reads its key (ConvertContainer in
// pkg/systemd/quadlet/quadlet.go):
//
//   - single values (ContainerName, Image, Entrypoint, User, ...): the last assignment
//     wins, surrounding double quotes are stripped (UnitFile.Lookup), "" means unset;
//   - booleans: nil when the key is absent; 1/yes/true/on are true, 0/no/false/off and
//     the empty value false (Podman reads every other value as false; here it is an
//     error, so a typo in a hardening key cannot turn it off);
//   - lists of values (Volume, Tmpfs, Network, Ulimit, GroupAdd): one entry per
//     assignment, verbatim, an empty assignment clears the earlier ones (LookupAll);
//   - word lists (DropCapability, AddCapability): the words of every assignment, quotes
//     removed, backslashes literal (LookupAllStrv);
//   - argument lists (Exec: last assignment only; PodmanArgs, Mount, EnvironmentFile: all
//     assignments): command-line words with quotes and C escapes (LookupAllArgs);
//   - KEY=VALUE maps (Environment, Label, Annotation): the words of every assignment cut
//     at the first '='; the last value of a key wins, an empty assignment clears the map
//     (LookupAllKeyVal). Podman 5.4 drops a word without '='; here it is an error.
//
// [Unit], [Service] and [Install] fields are systemd's: text passed on verbatim, the last
// assignment wins ("" is unset), WantedBy is a word list.
//
// Memory: the Memory= key only exists since Podman 5.5 (containers/podman#25346), so
// a unit for 5.4 says `PodmanArgs=--memory=VALUE`. Reading, a first PodmanArgs word
// `--memory=VALUE` becomes Memory when there is no Memory= key; rendering writes Memory
// as that first word. The flags end up in the same order either way.
//
// Collections are nil when empty; ParseContainer never returns empty non-nil ones.
type Container struct {
	// [Unit]
	Description string

	// [Container]
	ContainerName        string
	Image                string
	Exec                 []string
	Entrypoint           string
	WorkingDir           string
	User                 string
	Group                string
	UserNS               string
	GroupAdd             []string
	Environment          map[string]string
	EnvironmentFile      []string
	Volume               []string
	Mount                []string
	Tmpfs                []string
	Network              []string
	HostName             string
	ReadOnly             *bool
	ReadOnlyTmpfs        *bool
	DropCapability       []string
	AddCapability        []string
	NoNewPrivileges      *bool
	SecurityLabelDisable *bool
	Memory               string
	PidsLimit            string
	ShmSize              string
	Ulimit               []string
	Label                map[string]string
	Annotation           map[string]string
	Timezone             string
	Pull                 string
	RunInit              *bool
	StopSignal           string
	StopTimeout          string
	PodmanArgs           []string

	// [Service]
	Restart         string
	RestartSec      string
	TimeoutStartSec string
	TimeoutStopSec  string

	// [Install]
	WantedBy []string

	// Extra holds the settings of the unit that Container does not model, verbatim
	// (empty assignments included), grouped by section in render order and in file
	// order within a section. Render writes them back after the modelled keys; it
	// checks their sections and [Container] key names, not what they mean.
	Extra []Setting
}

// Setting is one Key=Value line of a section.
type Setting struct {
	Section, Key, Value string
}

// Section names a unit may have. Other sections are refused: a .container unit only
// becomes a service, and systemd ignores X- sections.
const (
	SectionUnit      = "Unit"
	SectionContainer = "Container"
	SectionService   = "Service"
	SectionInstall   = "Install"
	SectionQuadlet   = "Quadlet"
)

var sectionOrder = []string{SectionUnit, SectionContainer, SectionService, SectionInstall, SectionQuadlet}

type kind uint8

const (
	kindRaw      kind = iota // systemd single value: last assignment, verbatim
	kindString               // Podman Lookup: last assignment, quotes stripped
	kindBool                 // Podman LookupBoolean
	kindEach                 // Podman LookupAll: one value per assignment
	kindWords                // Podman LookupAllStrv
	kindArgs                 // Podman LookupAllArgs, rendered one word per line
	kindArgLine              // Podman LookupAllArgs, rendered on one line
	kindLastArgs             // Podman LookupLastArgs
	kindAssign               // Podman LookupAllKeyVal
)

// word says how a [Container] value sits in the generated command line.
type word uint8

const (
	wordWhole  word = iota // the value (each word of it) is a whole command-line word
	wordInside             // the value is inside a word (Group, in --user USER:GROUP)
	wordVolume             // Volume: the word is SOURCE:DEST[:OPTIONS], or DEST alone
)

type field struct {
	section, key string
	kind         kind
	word         word
	str          func(*Container) *string
	list         func(*Container) *[]string
	flag         func(*Container) **bool
	dict         func(*Container) *map[string]string
	// check, when set, refuses a value (or word) the generator refuses.
	check func(string) error
}

// fields is the table of modelled keys, in render order.
var fields = []field{
	{section: SectionUnit, key: "Description", kind: kindRaw, str: func(c *Container) *string { return &c.Description }},

	{section: SectionContainer, key: "ContainerName", kind: kindString, str: func(c *Container) *string { return &c.ContainerName }},
	{section: SectionContainer, key: "Image", kind: kindString, str: func(c *Container) *string { return &c.Image }},
	{section: SectionContainer, key: "Exec", kind: kindLastArgs, list: func(c *Container) *[]string { return &c.Exec }},
	{section: SectionContainer, key: "Entrypoint", kind: kindString, str: func(c *Container) *string { return &c.Entrypoint }},
	{section: SectionContainer, key: "WorkingDir", kind: kindString, str: func(c *Container) *string { return &c.WorkingDir }},
	{section: SectionContainer, key: "User", kind: kindString, str: func(c *Container) *string { return &c.User }},
	{section: SectionContainer, key: "Group", kind: kindString, word: wordInside, str: func(c *Container) *string { return &c.Group }},
	{section: SectionContainer, key: "UserNS", kind: kindString, str: func(c *Container) *string { return &c.UserNS }},
	{section: SectionContainer, key: "GroupAdd", kind: kindEach, list: func(c *Container) *[]string { return &c.GroupAdd }},
	{section: SectionContainer, key: "Environment", kind: kindAssign, dict: func(c *Container) *map[string]string { return &c.Environment }},
	{section: SectionContainer, key: "EnvironmentFile", kind: kindArgs, list: func(c *Container) *[]string { return &c.EnvironmentFile }},
	{section: SectionContainer, key: "Volume", kind: kindEach, word: wordVolume, list: func(c *Container) *[]string { return &c.Volume }},
	{section: SectionContainer, key: "Mount", kind: kindArgs, check: checkMount, list: func(c *Container) *[]string { return &c.Mount }},
	{section: SectionContainer, key: "Tmpfs", kind: kindEach, list: func(c *Container) *[]string { return &c.Tmpfs }},
	{section: SectionContainer, key: "Network", kind: kindEach, check: checkNetwork, list: func(c *Container) *[]string { return &c.Network }},
	{section: SectionContainer, key: "HostName", kind: kindString, str: func(c *Container) *string { return &c.HostName }},
	{section: SectionContainer, key: "ReadOnly", kind: kindBool, flag: func(c *Container) **bool { return &c.ReadOnly }},
	{section: SectionContainer, key: "ReadOnlyTmpfs", kind: kindBool, flag: func(c *Container) **bool { return &c.ReadOnlyTmpfs }},
	{section: SectionContainer, key: "DropCapability", kind: kindWords, list: func(c *Container) *[]string { return &c.DropCapability }},
	{section: SectionContainer, key: "AddCapability", kind: kindWords, list: func(c *Container) *[]string { return &c.AddCapability }},
	{section: SectionContainer, key: "NoNewPrivileges", kind: kindBool, flag: func(c *Container) **bool { return &c.NoNewPrivileges }},
	{section: SectionContainer, key: "SecurityLabelDisable", kind: kindBool, flag: func(c *Container) **bool { return &c.SecurityLabelDisable }},
	{section: SectionContainer, key: "Memory", kind: kindString, str: func(c *Container) *string { return &c.Memory }},
	{section: SectionContainer, key: "PidsLimit", kind: kindString, str: func(c *Container) *string { return &c.PidsLimit }},
	{section: SectionContainer, key: "ShmSize", kind: kindString, str: func(c *Container) *string { return &c.ShmSize }},
	{section: SectionContainer, key: "Ulimit", kind: kindEach, list: func(c *Container) *[]string { return &c.Ulimit }},
	{section: SectionContainer, key: "Label", kind: kindAssign, dict: func(c *Container) *map[string]string { return &c.Label }},
	{section: SectionContainer, key: "Annotation", kind: kindAssign, dict: func(c *Container) *map[string]string { return &c.Annotation }},
	{section: SectionContainer, key: "Timezone", kind: kindString, str: func(c *Container) *string { return &c.Timezone }},
	{section: SectionContainer, key: "Pull", kind: kindString, str: func(c *Container) *string { return &c.Pull }},
	{section: SectionContainer, key: "RunInit", kind: kindBool, flag: func(c *Container) **bool { return &c.RunInit }},
	{section: SectionContainer, key: "StopSignal", kind: kindString, str: func(c *Container) *string { return &c.StopSignal }},
	{section: SectionContainer, key: "StopTimeout", kind: kindString, str: func(c *Container) *string { return &c.StopTimeout }},
	{section: SectionContainer, key: "PodmanArgs", kind: kindArgLine, list: func(c *Container) *[]string { return &c.PodmanArgs }},

	{section: SectionService, key: "Restart", kind: kindRaw, str: func(c *Container) *string { return &c.Restart }},
	{section: SectionService, key: "RestartSec", kind: kindRaw, str: func(c *Container) *string { return &c.RestartSec }},
	{section: SectionService, key: "TimeoutStartSec", kind: kindRaw, str: func(c *Container) *string { return &c.TimeoutStartSec }},
	{section: SectionService, key: "TimeoutStopSec", kind: kindRaw, str: func(c *Container) *string { return &c.TimeoutStopSec }},

	{section: SectionInstall, key: "WantedBy", kind: kindWords, list: func(c *Container) *[]string { return &c.WantedBy }},
}

func modelled(section, key string) bool {
	return slices.ContainsFunc(fields, func(f field) bool { return f.section == section && f.key == key })
}

const memoryFlag = "--memory="

// ParseContainer parses a .container unit and reads it into a Container.
func ParseContainer(data []byte) (*Container, error) {
	f, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return ContainerFromFile(f)
}

// ContainerFromFile reads a parsed unit into a Container. Besides the errors of each
// key, it refuses what Podman 5.4's generator refuses: sections other than [Unit],
// [Container], [Service], [Install], [Quadlet] and X-*; keys the generator does not know
// in [Container] and [Quadlet]; no Image (or both Image and Rootfs); Group without User;
// a [Service] KillMode other than mixed or control-group, a Type other than notify or
// oneshot. Errors name the line.
func ContainerFromFile(f *File) (*Container, error) {
	if err := checkUnit(f); err != nil {
		return nil, err
	}
	c := &Container{}
	for _, fd := range fields {
		if err := fd.decode(c, f); err != nil {
			return nil, err
		}
	}
	if c.Memory == "" && len(c.PodmanArgs) > 0 && len(c.PodmanArgs[0]) > len(memoryFlag) && strings.HasPrefix(c.PodmanArgs[0], memoryFlag) {
		c.Memory = c.PodmanArgs[0][len(memoryFlag):]
		c.PodmanArgs = nilIfEmpty(c.PodmanArgs[1:])
	}
	for _, l := range f.Lines {
		if l.Key != "" && !modelled(l.Section, l.Key) {
			c.Extra = append(c.Extra, Setting{Section: l.Section, Key: l.Key, Value: l.Value})
		}
	}
	sortExtra(c.Extra)
	return c, nil
}

// checkUnit applies the generator's refusals to a unit.
func checkUnit(f *File) error {
	hasContainer := false
	for _, l := range f.Lines {
		switch {
		case l.Header:
			if !slices.Contains(sectionOrder, l.Section) && !strings.HasPrefix(l.Section, "X-") {
				return fmt.Errorf("%s%w: section [%s] has no place in a .container unit", at(l.Num), ErrInvalid, clip(l.Section))
			}
			hasContainer = hasContainer || l.Section == SectionContainer
		case l.Key == "":
		case l.Section == SectionContainer && !knownContainerKey(l.Key):
			return fmt.Errorf("%s%w: Podman does not know the key %s in [Container]", at(l.Num), ErrInvalid, clip(l.Key))
		case l.Section == SectionQuadlet && !quadletKeys[l.Key]:
			return fmt.Errorf("%s%w: Podman does not know the key %s in [Quadlet]", at(l.Num), ErrInvalid, clip(l.Key))
		}
	}
	if !hasContainer {
		return fmt.Errorf("%w: no [Container] section", ErrInvalid)
	}
	image, _, _ := lookup(f, SectionContainer, "Image")
	rootfs, _, _ := lookup(f, SectionContainer, "Rootfs")
	switch {
	case image == "" && rootfs == "":
		return fmt.Errorf("%w: no Image (or Rootfs) in [Container]", ErrInvalid)
	case image != "" && rootfs != "":
		return fmt.Errorf("%w: Image and Rootfs cannot both be set", ErrInvalid)
	}
	group, num, _ := lookup(f, SectionContainer, "Group")
	if user, _, _ := lookup(f, SectionContainer, "User"); group != "" && user == "" {
		return fmt.Errorf("%s%w: Group set without User", at(num), ErrInvalid)
	}
	if v, num, ok := lookup(f, SectionService, "KillMode"); ok && v != "mixed" && v != "control-group" {
		return fmt.Errorf("%s%w: KillMode=%s; the generator only allows mixed or control-group", at(num), ErrInvalid, clip(v))
	}
	if v, num, ok := lookup(f, SectionService, "Type"); ok && v != "notify" && v != "oneshot" {
		return fmt.Errorf("%s%w: Type=%s; the generator only allows notify or oneshot", at(num), ErrInvalid, clip(v))
	}
	return nil
}

// at prefixes a message with the line number, when there is one.
func at(num int) string {
	if num == 0 {
		return ""
	}
	return fmt.Sprintf("line %d: ", num)
}

func knownContainerKey(key string) bool {
	_, ok := containerKeys[key]
	return ok
}

// lookup is UnitFile.Lookup of Podman 5.4: the last assignment with trailing white
// space and all leading and trailing double quotes removed.
func lookup(f *File, section, key string) (string, int, bool) {
	l, ok := f.last(section, key)
	if !ok {
		return "", 0, false
	}
	return strings.Trim(strings.TrimRightFunc(l.Value, unicode.IsSpace), `"`), l.Num, true
}

func (fd field) decode(c *Container, f *File) error {
	fail := func(num int, err error) error {
		if !errors.Is(err, ErrUnitContext) && !errors.Is(err, ErrInvalid) {
			err = fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return fmt.Errorf("%s%s: %w", at(num), fd.key, err)
	}
	switch fd.kind {
	case kindRaw:
		if l, ok := f.last(fd.section, fd.key); ok {
			*fd.str(c) = l.Value
		}
	case kindString:
		v, num, ok := lookup(f, fd.section, fd.key)
		if !ok || v == "" {
			return nil
		}
		if err := checkRawValue(v); err != nil {
			return fail(num, fmt.Errorf("value inside the quotes %v", err))
		}
		lit, err := fd.literal(v)
		if err != nil {
			return fail(num, err)
		}
		*fd.str(c) = lit
	case kindBool:
		v, num, ok := lookup(f, fd.section, fd.key)
		if !ok {
			return nil
		}
		b, err := parseBool(v)
		if err != nil {
			return fail(num, err)
		}
		*fd.flag(c) = &b
	case kindEach:
		for _, l := range f.settings(fd.section, fd.key) {
			lit, err := fd.literal(l.Value)
			if err != nil {
				return fail(l.Num, err)
			}
			*fd.list(c) = append(*fd.list(c), lit)
		}
	case kindWords, kindArgs, kindArgLine, kindLastArgs:
		lines := f.settings(fd.section, fd.key)
		if fd.kind == kindLastArgs {
			lines = nil
			if l, ok := f.last(fd.section, fd.key); ok {
				lines = []Line{l}
			}
		}
		mode := execWords
		if fd.kind == kindWords {
			mode = listWords
		}
		for _, l := range lines {
			words, err := splitWords(l.Value, mode)
			if err != nil {
				return fail(l.Num, err)
			}
			for _, w := range words {
				lit, err := fd.literal(w)
				if err != nil {
					return fail(l.Num, err)
				}
				*fd.list(c) = append(*fd.list(c), lit)
			}
		}
	case kindAssign:
		// The generator keys its map by the unit text; two texts that systemd
		// unescapes to the same name ("A$$" and "A$") would reach podman in the
		// generator's sort order, not in file order.
		names := map[string]string{}
		for _, l := range f.settings(fd.section, fd.key) {
			words, err := splitWords(l.Value, execWords)
			if err != nil {
				return fail(l.Num, err)
			}
			for _, w := range words {
				lit, err := fd.literal(w)
				if err != nil {
					return fail(l.Num, err)
				}
				k, v, ok := strings.Cut(lit, "=")
				if err := checkAssignKey(k, ok); err != nil {
					return fail(l.Num, fmt.Errorf("%q: %v", clip(lit), err))
				}
				text, _, _ := strings.Cut(w, "=")
				if prev, seen := names[k]; seen && prev != text {
					return fail(l.Num, fmt.Errorf("%w: %q and %q both name %q", ErrInvalid, clip(prev), clip(text), clip(k)))
				}
				names[k] = text
				if *fd.dict(c) == nil {
					*fd.dict(c) = map[string]string{}
				}
				(*fd.dict(c))[k] = v
			}
		}
	}
	return nil
}

// literal turns the unit text of one value or word of this field into what podman
// sees; only [Container] values go through systemd's command line processing.
func (fd field) literal(s string) (string, error) {
	if fd.section != SectionContainer {
		return s, nil
	}
	var err error
	switch fd.word {
	case wordWhole:
		err = checkWordStart(s)
	case wordVolume:
		err = checkWordStart(volumeWord(volumeParts(s)))
	}
	if err != nil {
		return "", err
	}
	lit, err := literalValue(s)
	if err != nil {
		return "", err
	}
	if err := fd.checkLiteral(lit); err != nil {
		return "", err
	}
	return lit, nil
}

// checkWord refuses a literal value whose command-line word systemd would not pass on
// as it is: a lone ";" ends the ExecStart= command, an empty word disappears.
func (fd field) checkWord(lit string) error {
	w := lit
	switch fd.word {
	case wordInside:
		return nil
	case wordVolume:
		w = volumeWord(volumeParts(lit))
	}
	switch w {
	case ";":
		return fmt.Errorf("%w: a lone ';' word would end systemd's ExecStart= command", ErrInvalid)
	case "":
		return fmt.Errorf("%w: %q makes an empty command-line word, which the generator drops", ErrInvalid, clip(lit))
	}
	return nil
}

// volumeParts splits a Volume value the way addVolumes does: SOURCE:DEST[:OPTIONS],
// or DEST alone. options keeps its leading ':'.
func volumeParts(v string) (source, dest, options string) {
	parts := strings.SplitN(v, ":", 3)
	if len(parts) < 2 {
		return "", v, ""
	}
	if len(parts) == 3 {
		options = ":" + parts[2]
	}
	return parts[0], parts[1], options
}

// volumeWord is the -v argument addVolumes builds: DEST alone when SOURCE is empty.
func volumeWord(source, dest, options string) string {
	if source == "" {
		return dest
	}
	return source + ":" + dest + options
}

func checkAssignKey(k string, hasEq bool) error {
	switch {
	case !hasEq:
		return errors.New("has no '=' (Podman 5.4 drops such a word)")
	case k == "":
		return errors.New("empty name before '='")
	}
	return nil
}

// parseBool accepts Podman's true values and their false counterparts, in any case.
func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "yes", "true", "on":
		return true, nil
	case "", "0", "no", "false", "off":
		return false, nil
	}
	return false, fmt.Errorf("%w: %q is not a boolean (Podman would read it as false)", ErrInvalid, clip(v))
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// sortExtra groups settings by section in render order, keeping their order otherwise.
func sortExtra(extra []Setting) {
	rank := sectionRanks()
	for _, s := range extra {
		if _, ok := rank[s.Section]; !ok {
			rank[s.Section] = len(rank)
		}
	}
	slices.SortStableFunc(extra, func(a, b Setting) int {
		return cmp.Compare(rank[a.Section], rank[b.Section])
	})
}

// sectionRanks numbers the standard sections in render order.
func sectionRanks() map[string]int {
	rank := map[string]int{}
	for i, s := range sectionOrder {
		rank[s] = i
	}
	return rank
}

// Unsupported lists, as sorted "Section.Key" names, the keys of the unit that Container
// does not model (those in Extra), so a caller can refuse or warn: PodmanRunArgs
// ignores them. X- sections and X- keys outside [Container], which systemd ignores,
// are left out.
func (c *Container) Unsupported() []string {
	var out []string
	for _, s := range c.Extra {
		if strings.HasPrefix(s.Section, "X-") || s.Section != SectionContainer && strings.HasPrefix(s.Key, "X-") {
			continue
		}
		out = append(out, s.Section+"."+s.Key)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Render writes the unit as deterministic text: sections [Unit], [Container],
// [Service], [Install], then the others in Extra; in each, the modelled keys in a fixed
// order, then Extra's settings; comments are not part of a Container (File keeps
// them). Podman 5.4's generator accepts every modelled key as written (Memory goes
// into PodmanArgs). ParseContainer(Render()) gives c back when c came from
// ParseContainer, or was built in code with nil for empty collections and Extra
// grouped by section.
func (c *Container) Render() ([]byte, error) {
	f, err := c.File()
	if err != nil {
		return nil, err
	}
	return f.Render()
}

// File builds the unit Render writes.
func (c *Container) File() (*File, error) {
	extra := slices.Clone(c.Extra)
	sortExtra(extra)
	for _, s := range extra {
		if modelled(s.Section, s.Key) {
			return nil, fmt.Errorf("%w: Extra sets %s.%s, which is a Container field", ErrInvalid, s.Section, s.Key)
		}
	}
	order := slices.Clone(sectionOrder)
	rank := sectionRanks()
	bySection := map[string][]Line{}
	add := func(section, key, value string) {
		if _, ok := rank[section]; !ok {
			rank[section] = len(order)
			order = append(order, section)
		}
		bySection[section] = append(bySection[section], Line{Section: section, Key: key, Value: value})
	}
	for _, fd := range fields {
		if err := fd.encode(c, add); err != nil {
			return nil, fmt.Errorf("%s: %w", fd.key, err)
		}
	}
	for _, s := range extra {
		add(s.Section, s.Key, s.Value)
	}
	f := &File{}
	prev := ""
	for _, s := range order {
		if len(bySection[s]) == 0 {
			continue
		}
		if prev != "" {
			f.Lines = append(f.Lines, Line{Section: prev})
		}
		f.Lines = append(f.Lines, Line{Section: s, Header: true})
		f.Lines = append(f.Lines, bySection[s]...)
		prev = s
	}
	if _, err := f.Render(); err != nil {
		return nil, err
	}
	if err := checkUnit(f); err != nil {
		return nil, err
	}
	return f, nil
}

func (fd field) encode(c *Container, add func(section, key, value string)) error {
	text := func(s string) string {
		if fd.section == SectionContainer {
			return unitText(s)
		}
		return s
	}
	switch fd.kind {
	case kindRaw, kindString:
		v := *fd.str(c)
		if v == "" || fd.key == "Memory" {
			return nil
		}
		if err := fd.checkLiteral(v); err != nil {
			return err
		}
		t := text(v)
		if err := checkRawValue(t); err != nil {
			return fmt.Errorf("%w: value %v", ErrInvalid, err)
		}
		if fd.kind == kindString && (strings.HasPrefix(t, `"`) || strings.HasSuffix(t, `"`)) {
			return fmt.Errorf("%w: value cannot start or end with '\"' (the generator strips them)", ErrInvalid)
		}
		add(fd.section, fd.key, t)
	case kindBool:
		if b := *fd.flag(c); b != nil {
			add(fd.section, fd.key, fmt.Sprint(*b))
		}
	case kindEach:
		for _, v := range *fd.list(c) {
			if err := fd.checkLiteral(v); err != nil {
				return err
			}
			t := text(v)
			if err := checkRawValue(t); err != nil || t == "" {
				return fmt.Errorf("%w: value %q cannot be written on its own line", ErrInvalid, clip(v))
			}
			add(fd.section, fd.key, t)
		}
	case kindWords, kindArgs, kindArgLine, kindLastArgs:
		words := slices.Clone(*fd.list(c))
		if fd.key == "PodmanArgs" {
			if c.Memory == "" && len(words) > 0 && len(words[0]) > len(memoryFlag) && strings.HasPrefix(words[0], memoryFlag) {
				return fmt.Errorf("%w: a leading %s word is read back as Memory; set Memory instead", ErrInvalid, memoryFlag)
			}
			if c.Memory != "" {
				words = append([]string{memoryFlag + c.Memory}, words...)
			}
		}
		var texts []string
		for _, w := range words {
			if err := fd.checkLiteral(w); err != nil {
				return err
			}
			texts = append(texts, text(w))
		}
		join := joinExec
		if fd.kind == kindWords {
			join = joinList
		}
		if fd.kind == kindArgs {
			for _, t := range texts {
				v, err := join([]string{t})
				if err != nil {
					return fmt.Errorf("%w: %v", ErrInvalid, err)
				}
				add(fd.section, fd.key, v)
			}
			return nil
		}
		if len(texts) == 0 {
			return nil
		}
		v, err := join(texts)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		add(fd.section, fd.key, v)
	case kindAssign:
		m := *fd.dict(c)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if k == "" || strings.Contains(k, "=") {
				return fmt.Errorf("%w: name %q is empty or contains '='", ErrInvalid, clip(k))
			}
			v, err := joinExec([]string{unitText(k + "=" + m[k])})
			if err != nil {
				return fmt.Errorf("%w: %s: %v", ErrInvalid, clip(k), err)
			}
			add(fd.section, fd.key, v)
		}
	}
	return nil
}

// checkLiteral refuses a [Container] value that no unit text can carry through the
// generator and systemd unchanged.
func (fd field) checkLiteral(v string) error {
	if fd.section != SectionContainer {
		return nil
	}
	if err := fd.checkWord(v); err != nil {
		return err
	}
	if fd.check != nil {
		return fd.check(v)
	}
	return nil
}
