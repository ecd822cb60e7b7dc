package quadlet

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	podmanparser "github.com/containers/podman/v5/pkg/systemd/parser"
	podmanquadlet "github.com/containers/podman/v5/pkg/systemd/quadlet"
)

// This file checks the package against Podman's own code (the v5.7.1 of go.mod, whose
// unit parser and splitter behave like v5.4's; where the two differ, our reading
// refuses the input, so the comparison only runs on what both agree on).

// checkAgainstPodman: when ParseContainer accepted data as c, Podman's parser accepts
// it too and its Lookup functions, through systemd's escapes, give the same values;
// and Podman's generator, fed Render's text, puts the same arguments after `podman run`
// as PodmanRunArgs (as a multiset: its order partly follows Go map iteration).
func checkAgainstPodman(t *testing.T, data []byte, c *Container) {
	t.Helper()
	pf := podmanparser.NewUnitFile()
	if err := pf.Parse(string(data)); err != nil {
		t.Fatalf("Podman's parser refuses what we accept: %v", err)
	}
	want := podmanView(t, pf)
	got := *c
	got.Extra = nil
	if !reflect.DeepEqual(&got, want) {
		t.Fatalf("typed view differs from Podman's lookups:\n ours   %#v\n podman %#v", &got, want)
	}
	checkGenerator(t, c)
}

// podmanView builds the modelled fields from Podman's lookups.
func podmanView(t *testing.T, pf *podmanparser.UnitFile) *Container {
	t.Helper()
	lit := func(fd field, s string) string {
		if fd.section != SectionContainer {
			return s
		}
		v, err := literalValue(s)
		if err != nil {
			t.Fatalf("%s %q: %v", fd.key, s, err)
		}
		return v
	}
	c := &Container{}
	for _, fd := range fields {
		var words []string
		switch fd.kind {
		case kindRaw:
			*fd.str(c), _ = pf.LookupLast(fd.section, fd.key)
		case kindString:
			v, _ := pf.Lookup(fd.section, fd.key)
			*fd.str(c) = lit(fd, v)
		case kindBool:
			if b, ok := pf.LookupBoolean(fd.section, fd.key); ok {
				*fd.flag(c) = &b
			}
		case kindEach:
			words = pf.LookupAll(fd.section, fd.key)
		case kindWords:
			words = pf.LookupAllStrv(fd.section, fd.key)
		case kindArgs, kindArgLine:
			words = pf.LookupAllArgs(fd.section, fd.key)
		case kindLastArgs:
			var err error
			if words, _, err = pf.LookupLastArgs(fd.section, fd.key); err != nil {
				t.Fatalf("%s: %v", fd.key, err)
			}
		case kindAssign:
			m, err := pf.LookupAllKeyVal(fd.section, fd.key)
			if err != nil {
				t.Fatalf("%s: %v", fd.key, err)
			}
			for k, v := range m {
				if v == nil {
					t.Fatalf("%s: %q without '='", fd.key, k)
				}
				if *fd.dict(c) == nil {
					*fd.dict(c) = map[string]string{}
				}
				name, value, _ := strings.Cut(lit(fd, k+"="+*v), "=")
				(*fd.dict(c))[name] = value
			}
		}
		for _, w := range words {
			*fd.list(c) = append(*fd.list(c), lit(fd, w))
		}
	}
	if c.Memory == "" && len(c.PodmanArgs) > 0 && len(c.PodmanArgs[0]) > len(memoryFlag) && strings.HasPrefix(c.PodmanArgs[0], memoryFlag) {
		c.Memory = c.PodmanArgs[0][len(memoryFlag):]
		c.PodmanArgs = nilIfEmpty(c.PodmanArgs[1:])
	}
	return c
}

// generatorFixed are the arguments the generator adds once whatever the keys.
var generatorFixed = []string{"--replace", "--rm", "--cgroups=split", "--sdnotify=conmon", "-d"}

func checkGenerator(t *testing.T, c *Container) {
	t.Helper()
	modelledOnly := *c
	modelledOnly.Extra = slices.DeleteFunc(slices.Clone(c.Extra), func(s Setting) bool { return s.Section == SectionContainer })
	ours, err := modelledOnly.PodmanRunArgs()
	if err != nil {
		if !errors.Is(err, ErrUnitContext) {
			t.Fatalf("PodmanRunArgs: %v", err)
		}
		return
	}
	// Podman 5.5 added .artifact sources, which 5.4 (and PodmanRunArgs) pass on as names.
	if slices.ContainsFunc(append(slices.Clone(c.Volume), c.Mount...), func(s string) bool { return strings.Contains(s, ".artifact") }) {
		return
	}
	text, err := modelledOnly.Render()
	if err != nil {
		t.Fatal(err)
	}
	pf := podmanparser.NewUnitFile()
	if err := pf.Parse(string(text)); err != nil {
		t.Fatalf("Podman's parser refuses our rendering: %v\n%s", err, text)
	}
	pf.Filename = "sidecar.container"
	service, _, err := podmanquadlet.ConvertContainer(pf, map[string]*podmanquadlet.UnitInfo{pf.Filename: {ServiceName: "sidecar"}}, false)
	if err != nil {
		t.Fatalf("Podman's generator refuses our rendering: %v\n%s", err, text)
	}
	line, ok, err := service.LookupLastArgs(podmanquadlet.ServiceGroup, "ExecStart")
	if err != nil || !ok || len(line) < 2 || line[1] != "run" {
		t.Fatalf("generated ExecStart %q: %v", line, err)
	}
	checkSameArgs(t, ours, line[2:], text)
}

// checkSameArgs compares PodmanRunArgs with the words after `podman run` of a generated
// ExecStart=, less the generator's fixed flags and after systemd's unescaping.
func checkSameArgs(t *testing.T, ours, generated []string, unit []byte) {
	t.Helper()
	var theirs []string
	fixed := slices.Clone(generatorFixed)
	for _, a := range generated {
		if i := slices.Index(fixed, a); i >= 0 {
			fixed = slices.Delete(fixed, i, i+1)
			continue
		}
		v, err := literalValue(a)
		if err != nil {
			t.Fatalf("generated word %q: %v", a, err)
		}
		theirs = append(theirs, v)
	}
	if !slices.Equal(slices.Sorted(slices.Values(ours)), slices.Sorted(slices.Values(theirs))) {
		t.Fatalf("arguments differ from Podman's generator:\n ours   %q\n podman %q\n%s", ours, theirs, unit)
	}
}

// TestRealGenerator feeds the canonical renderings of the golden inputs (less their
// unmodelled [Container] keys) and of sidecarSpec to a real Quadlet generator binary, named by $QUADLET_GENERATOR (for
// Podman 5.4: /usr/libexec/podman/quadlet of Debian 13's podman package), with
// -dryrun, and compares each generated ExecStart= with PodmanRunArgs.
func TestRealGenerator(t *testing.T) {
	bin := os.Getenv("QUADLET_GENERATOR")
	if bin == "" {
		if os.Getenv("ARIZUKO_REQUIRE_ENGINES") == "1" {
			t.Fatal("QUADLET_GENERATOR is not set: hack/test.sh points it at Podman 5's generator in the test host's chroot")
		}
		t.Skip("set QUADLET_GENERATOR to a quadlet binary to run this test")
	}
	containers := map[string]*Container{"spec": sidecarSpec()}
	inputs, err := filepath.Glob("testdata/*.container")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range inputs {
		data, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ParseContainer(data)
		if err != nil {
			t.Fatal(err)
		}
		containers[strings.TrimSuffix(filepath.Base(in), ".container")] = c
	}
	dir := t.TempDir()
	want := map[string][]string{}
	units := map[string][]byte{}
	for name, c := range containers {
		c.Extra = slices.DeleteFunc(c.Extra, func(s Setting) bool { return s.Section == SectionContainer })
		args, err := c.PodmanRunArgs()
		if err != nil {
			continue
		}
		text, err := c.Render()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".container"), text, 0o644); err != nil {
			t.Fatal(err)
		}
		want[name+".service"], units[name+".service"] = args, text
	}
	if len(want) < 5 {
		t.Fatalf("only %d units to check", len(want))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-dryrun")
	cmd.Env = append(os.Environ(), "QUADLET_UNIT_DIRS="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s -dryrun: %v\n%s", bin, err, stderr.Bytes())
	}
	generated := map[string][]byte{}
	name := ""
	for line := range strings.Lines(string(out)) {
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), "---"); ok && strings.HasSuffix(n, "---") {
			name = strings.TrimSuffix(n, "---")
			continue
		}
		generated[name] = append(generated[name], line...)
	}
	for service, args := range want {
		f, err := Parse(generated[service])
		if err != nil {
			t.Fatalf("%s: %v", service, err)
		}
		execStart, _ := f.Value(SectionService, "ExecStart")
		words, err := splitWords(execStart, execWords)
		if err != nil || len(words) < 2 || words[1] != "run" {
			t.Fatalf("%s: ExecStart=%s: %v", service, execStart, err)
		}
		checkSameArgs(t, args, slices.DeleteFunc(words[2:], func(w string) bool { return w == "--cidfile=%t/%N.cid" }), units[service])
	}
	t.Logf("%d units: %s generates the arguments PodmanRunArgs gives", len(want), bin)
}
