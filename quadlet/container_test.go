package quadlet

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/golden/name, or rewrites the file with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, got, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./quadlet -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// runReport is what the .args.json golden files hold.
type runReport struct {
	Args        []string `json:"args,omitempty"`
	Error       string   `json:"error,omitempty"`
	Unsupported []string `json:"unsupported,omitempty"`
}

func report(t *testing.T, c *Container) []byte {
	t.Helper()
	var r runReport
	args, err := c.PodmanRunArgs()
	if err != nil {
		r.Error = err.Error()
	}
	r.Args = args
	r.Unsupported = c.Unsupported()
	out, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

// TestGolden: each testdata/NAME.container is parsed and written back as it is
// (NAME.roundtrip), read as a Container and rendered (NAME.canonical.container), and
// turned into podman run arguments (NAME.args.json).
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.container")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".container")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			rt, err := f.Render()
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".roundtrip", rt)
			f2, err := Parse(rt)
			if err != nil {
				t.Fatal(err)
			}
			if !sameLines(f, f2) {
				t.Fatal("round trip is not stable")
			}

			c, err := ContainerFromFile(f)
			if err != nil {
				t.Fatal(err)
			}
			canonical := mustRender(t, c)
			golden(t, name+".canonical.container", canonical)
			checkPodman54Keys(t, canonical, c)
			golden(t, name+".args.json", report(t, c))
			checkAgainstPodman(t, data, c)
		})
	}
}

// mustRender renders c and checks that parsing the text gives c back.
func mustRender(t *testing.T, c *Container) []byte {
	t.Helper()
	out, err := c.Render()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseContainer(out)
	if err != nil {
		t.Fatalf("rendered unit does not parse: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip differs:\n%#v\n%#v\n%s", c, back, out)
	}
	again, err := back.Render()
	if err != nil || !bytes.Equal(again, out) {
		t.Fatalf("second render differs: %v\n%s", err, again)
	}
	return out
}

// checkPodman54Keys: every [Container] key Render writes for a modelled field is one
// Podman 5.4's generator accepts.
func checkPodman54Keys(t *testing.T, text []byte, c *Container) {
	t.Helper()
	f, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range f.Lines {
		if l.Section == SectionContainer && l.Key != "" && modelled(l.Section, l.Key) && !containerKeys[l.Key] {
			t.Errorf("rendered key %s is not accepted by Podman 5.4", l.Key)
		}
	}
	if c.Memory != "" && slices.ContainsFunc(f.Lines, func(l Line) bool { return l.Key == "Memory" }) {
		t.Error("Memory= rendered")
	}
}

// sidecarSpec is the kind of container arizukod describes for an MCP sidecar.
func sidecarSpec() *Container {
	return &Container{
		Description:   "arizuko sidecar weather of group main",
		ContainerName: "arizuko-sc-6ca13d52-main-weather",
		Image:         "localhost/weather-mcp:1.2",
		Exec:          []string{"/usr/local/bin/weather-mcp", "--socket", "/run/mcp/weather.sock", "--greeting", "hello world"},
		Environment: map[string]string{
			"TZ": "UTC", "RATE": "100%", "LITERAL": "$HOME", "QUOTE": `say "hi"`, "MULTI": "a\nb",
		},
		Mount: []string{
			BindMount("/srv/arizuko/data/ipc/main/sidecars", "/run/mcp", false),
			BindMount("/srv/arizuko/skills, shared", "/skills", true),
		},
		Network:         []string{"none"},
		ReadOnly:        new(true),
		Tmpfs:           []string{"/tmp:rw,size=64m,mode=1777"},
		DropCapability:  []string{"all"},
		NoNewPrivileges: new(true),
		User:            "65534",
		Group:           "65534",
		Memory:          "1g",
		PidsLimit:       "256",
		Ulimit:          []string{"nofile=1024:1024", "nproc=1024:1024"},
		Label:           map[string]string{"io.arizuko.folder": "main", "io.arizuko.sidecar": "weather"},
		Pull:            "never",
		PodmanArgs:      []string{"--cpus=2"},
		TimeoutStopSec:  "15",
	}
}

func TestRenderSpec(t *testing.T) {
	c := sidecarSpec()
	out := mustRender(t, c)
	golden(t, "spec.canonical.container", out)
	checkPodman54Keys(t, out, c)
	golden(t, "spec.args.json", report(t, c))
	checkAgainstPodman(t, out, c)
}

func TestContainerErrors(t *testing.T) {
	const head = "[Container]\nImage=x\n"
	tests := []struct {
		name, in string
		err      error
		line     string
	}{
		{"unknown section", head + "[Foo]\nA=b\n", ErrInvalid, "line 3:"},
		{"unknown container key", head + "Foo=bar\n", ErrInvalid, "line 3:"},
		{"unknown quadlet key", head + "[Quadlet]\nFoo=bar\n", ErrInvalid, "line 4:"},
		{"no container section", "[Unit]\nDescription=x\n", ErrInvalid, ""},
		{"no image", "[Container]\nExec=x\n", ErrInvalid, ""},
		{"empty quoted image", "[Container]\nImage=\"\"\n", ErrInvalid, ""},
		{"image and rootfs", head + "Rootfs=/r\n", ErrInvalid, ""},
		{"group without user", head + "Group=1\n", ErrInvalid, "line 3:"},
		{"kill mode", head + "[Service]\nKillMode=process\n", ErrInvalid, "line 4:"},
		{"service type", head + "[Service]\nType=simple\n", ErrInvalid, "line 4:"},
		{"not a boolean", head + "ReadOnly=ture\n", ErrInvalid, "line 3:"},
		{"unbalanced quote in a word list", head + "DropCapability=\"all\n", ErrInvalid, "line 3:"},
		{"unknown escape", head + "Exec=echo \\q\n", ErrInvalid, "line 3:"},
		{"empty word before more words", head + "PodmanArgs=a \"\" b\n", ErrInvalid, "line 3:"},
		{"specifier", head + "Volume=%h/data:/data\n", ErrUnitContext, "line 3:"},
		{"variable word", head + "Exec=echo $HOME\n", ErrUnitContext, "line 3:"},
		{"braced variable", head + "Environment=A=${B}\n", ErrUnitContext, "line 3:"},
		{"variable as volume word", head + "Volume=:$X\n", ErrUnitContext, "line 3:"},
		{"lone percent", head + "Label=a=100%\n", ErrInvalid, "line 3:"},
		{"assignment without =", head + "Environment=A=1 B\n", ErrInvalid, "line 3:"},
		{"empty name", head + "Environment==1\n", ErrInvalid, "line 3:"},
		{"names equal after unescaping", head + "Environment=A$$=1\nEnvironment=A$=2\n", ErrInvalid, "line 4:"},
		{"command separator", head + "Exec=a ; b\n", ErrInvalid, "line 3:"},
		{"quoted value with spaces inside", "[Container]\nImage=\" x\"\n", ErrInvalid, "line 2:"},
		{"mount without type", head + "Mount=source=/a,destination=/b\n", ErrInvalid, "line 3:"},
		{"bind mount without source", head + "Mount=type=bind,destination=/b\n", ErrInvalid, "line 3:"},
		{"mount with a bare quote", head + "Mount='type=bind,source=a\"b,destination=/b'\n", ErrInvalid, "line 3:"},
		{"options on a container network", head + "Network=db.container:alias=x\n", ErrInvalid, "line 3:"},
		{"syntax errors pass through", "[Container]\nImage\n", ErrSyntax, "line 2:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseContainer([]byte(tt.in))
			if !errors.Is(err, tt.err) {
				t.Fatalf("got %+v, %v; want %v", c, err, tt.err)
			}
			if !strings.HasPrefix(err.Error(), tt.line) || tt.line == "" && strings.HasPrefix(err.Error(), "line") {
				t.Fatalf("error %q does not start with %q", err, tt.line)
			}
		})
	}
}

func TestContainerReading(t *testing.T) {
	c, err := ParseContainer([]byte(`[Container]
Image="localhost/app"
ReadOnly=
RunInit=On
NoNewPrivileges=0
Environment=A=1 "B=two words"
Environment=A=3
Label=
Network=none
Network=
Network=slirp4netns:allow_host_loopback=true
Exec=first
Exec=second "two words"
PodmanArgs=--memory=1g --cpus 1
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Container{
		Image:           "localhost/app",
		ReadOnly:        new(false),
		RunInit:         new(true),
		NoNewPrivileges: new(false),
		Environment:     map[string]string{"A": "3", "B": "two words"},
		Network:         []string{"slirp4netns:allow_host_loopback=true"},
		Exec:            []string{"second", "two words"},
		Memory:          "1g",
		PodmanArgs:      []string{"--cpus", "1"},
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %#v", c)
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Container)
	}{
		{"no image", func(c *Container) { c.Image = "" }},
		{"newline in image", func(c *Container) { c.Image = "a\nb" }},
		{"image in quotes", func(c *Container) { c.Image = `"a"` }},
		{"image with a trailing backslash", func(c *Container) { c.Image = `a\` }},
		{"empty exec word", func(c *Container) { c.Exec = []string{"a", ""} }},
		{"command separator", func(c *Container) { c.Exec = []string{";"} }},
		{"separator as a volume word", func(c *Container) { c.Volume = []string{":;"} }},
		{"environment name with =", func(c *Container) { c.Environment = map[string]string{"A=B": "c"} }},
		{"empty environment name", func(c *Container) { c.Environment = map[string]string{"": "c"} }},
		{"empty volume", func(c *Container) { c.Volume = []string{""} }},
		{"volume with leading space", func(c *Container) { c.Volume = []string{" /a:/b"} }},
		{"memory in podman args", func(c *Container) { c.Memory = ""; c.PodmanArgs = []string{"--memory=1g"} }},
		{"extra sets a field", func(c *Container) { c.Extra = []Setting{{SectionContainer, "Image", "y"}} }},
		{"extra in an unknown section", func(c *Container) { c.Extra = []Setting{{"Foo", "A", "b"}} }},
		{"extra unknown container key", func(c *Container) { c.Extra = []Setting{{SectionContainer, "Foo", "b"}} }},
		{"extra bad value", func(c *Container) { c.Extra = []Setting{{SectionUnit, "After", "a\nb"}} }},
		{"group without user", func(c *Container) { c.User = "" }},
		{"bad mount", func(c *Container) { c.Mount = []string{"type=bind"} }},
		{"newline in description", func(c *Container) { c.Description = "a\nb" }},
		{"empty wanted-by word", func(c *Container) { c.WantedBy = []string{""} }},
		{"empty capability", func(c *Container) { c.DropCapability = []string{""} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sidecarSpec()
			tt.edit(c)
			if _, err := c.Render(); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Render: %v", err)
			}
			if _, err := c.PodmanRunArgs(); !errors.Is(err, ErrInvalid) {
				t.Fatalf("PodmanRunArgs: %v", err)
			}
		})
	}
}

func TestPodmanRunArgsContext(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Container)
		err  error
	}{
		{"no container name", func(c *Container) { c.ContainerName = "" }, ErrUnitContext},
		{"image unit", func(c *Container) { c.Image = "app.image" }, ErrUnitContext},
		{"build unit", func(c *Container) { c.Image = "app.build" }, ErrUnitContext},
		{"network unit", func(c *Container) { c.Network = []string{"db.network:ip=10.0.0.2"} }, ErrUnitContext},
		{"container network", func(c *Container) { c.Network = []string{"db.container"} }, ErrUnitContext},
		{"volume unit", func(c *Container) { c.Volume = []string{"data.volume:/data"} }, ErrUnitContext},
		{"relative volume", func(c *Container) { c.Volume = []string{"./data:/data"} }, ErrUnitContext},
		{"relative env file", func(c *Container) { c.EnvironmentFile = []string{"app.env"} }, ErrUnitContext},
		{"mount of a volume unit", func(c *Container) { c.Mount = []string{"type=volume,src=data.volume,dst=/d"} }, ErrUnitContext},
		{"mount of an image unit", func(c *Container) { c.Mount = []string{"type=image,source=app.image,destination=/d"} }, ErrUnitContext},
		{"relative bind mount", func(c *Container) { c.Mount = []string{"type=bind,source=./d,destination=/d"} }, ErrUnitContext},
		{"rootfs instead of image", func(c *Container) { c.Image = ""; c.Extra = []Setting{{SectionContainer, "Rootfs", "/r"}} }, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sidecarSpec()
			tt.edit(c)
			if _, err := c.PodmanRunArgs(); !errors.Is(err, tt.err) {
				t.Fatalf("got %v, want %v", err, tt.err)
			}
		})
	}
}

func TestPodmanRunArgsMapping(t *testing.T) {
	c, err := ParseContainer([]byte(`[Container]
ContainerName=m
Image=img
RunInit=false
ReadOnly=false
Volume=/data
Volume=:/dest:ro
Volume=/src:/dest:ro,z
Mount=type=tmpfs,destination=/t
Mount=src=/a,type=bind,dst=/b,ro
Mount=type=bind,source=/a,target=/b,ro,source=/c
Mount='type=bind,"source=/with,comma",destination=/d'
`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.PodmanRunArgs()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"--name", "m", "--init=false", "--read-only=false",
		"-v", "/data", "-v", "/dest", "-v", "/src:/dest:ro,z",
		"--mount", "type=tmpfs,destination=/t",
		"--mount", "type=bind,source=/a,dst=/b,ro",
		"--mount", "type=bind,source=/a,target=/b,ro,source=/c",
		"--mount", `type=bind,"source=/with,comma",destination=/d`,
		"img",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestUnsupported(t *testing.T) {
	c, err := ParseContainer([]byte(`[Unit]
After=a.service
X-Mine=1
[Container]
Image=x
PublishPort=80
PublishPort=81
HealthCmd=true
[Service]
ExecStartPre=/bin/true
[X-Tool]
Anything=goes
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Container.HealthCmd", "Container.PublishPort", "Service.ExecStartPre", "Unit.After"}
	if got := c.Unsupported(); !slices.Equal(got, want) {
		t.Fatalf("got %q", got)
	}
}

func TestBindMount(t *testing.T) {
	tests := []struct {
		source, destination string
		readOnly            bool
		want                string
	}{
		{"/a", "/b", false, "type=bind,source=/a,destination=/b,rw"},
		{"/a b", "/c", true, "type=bind,source=/a b,destination=/c,ro"},
		{"/a,b", `/c"d`, true, `type=bind,"source=/a,b","destination=/c""d",ro`},
	}
	for _, tt := range tests {
		got := BindMount(tt.source, tt.destination, tt.readOnly)
		if got != tt.want {
			t.Errorf("BindMount(%q, %q, %v) = %q, want %q", tt.source, tt.destination, tt.readOnly, got, tt.want)
		}
		if arg, err := mountArg(got); err != nil || arg != got {
			t.Errorf("mountArg(%q) = %q, %v", got, arg, err)
		}
	}
}
