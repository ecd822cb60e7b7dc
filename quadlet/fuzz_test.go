package quadlet

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: parsing never panics and fails only with ErrSyntax; whatever parses
// renders, and the rendering parses to the same lines and renders identically. What
// ContainerFromFile accepts renders, parses back to the same Container (mustRender),
// agrees with Podman's own parser and generator (checkAgainstPodman), and gives
// PodmanRunArgs errors only of this package's kinds.
func FuzzParse(f *testing.F) {
	inputs, _ := filepath.Glob("testdata/*.container")
	for _, in := range inputs {
		data, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"", "[Container]\nImage=x\n", "[Container]\nImage=x\nExec=a \\\n# c\n b\n",
		"[Container]\nImage=x\nEnvironment=A=1 \"B=2 3\"\nEnvironment=\nLabel='k=v'\n",
		"[Container]\nImage=x\nPodmanArgs=--memory=1g\nMemory=2g\n",
		"[Container]\nImage=x\nDropCapability=\"all\nVolume=%h:/h\n",
		"[Container]\nImage=x\nExec=\\x41 $$ %% '\\n'\nUser=a\nGroup=b\n",
		"[Container]\r\nImage=x\r\n[X-A]\r\nk=v\\\r\n",
		"[Container]\nImage=x\nMount=type=bind,src=/a,dst=/b\nNetwork=a.container:x\n",
		"[Container]\nImage=x\n[Service]\nType=oneshot\nKillMode=mixed\n[Quadlet]\nDefaultDependencies=false\n",
		"[Unit]\nDescription=a \\\n\\\n b\n[Install]\nWantedBy=a.target \"b c.target\"\n",
		"\x00", "[\xff]", "k=v", "[A]\n\\\n", "[A]\nk=v \\", " ", "\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(checkInput)
}

// FuzzValue runs the checks of FuzzParse on one value of one modelled key, in a unit
// that is otherwise valid, so the fuzzer spends its time in the value readers.
func FuzzValue(f *testing.F) {
	for i := range fields {
		f.Add(uint8(i), `a "b c" \x41 $$d %%e`)
		f.Add(uint8(i), "type=bind,source=/a,destination=/b,ro")
	}
	f.Fuzz(func(t *testing.T, i uint8, value string) {
		fd := fields[int(i)%len(fields)]
		checkInput(t, []byte("[Container]\nImage=img\nContainerName=n\nUser=u\n["+fd.section+"]\n"+fd.key+"="+value+"\n"))
	})
}

func checkInput(t *testing.T, data []byte) {
	{
		file, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse error %v is not ErrSyntax", err)
			}
			return
		}
		out, err := file.Render()
		if err != nil {
			t.Fatalf("parsed file does not render: %v", err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("rendering does not parse: %v\n%q", err, out)
		}
		if !sameLines(file, again) {
			t.Fatalf("reparse differs:\n%+v\n%+v", file.Lines, again.Lines)
		}
		if out2, err := again.Render(); err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("second render differs: %v\n%q\n%q", err, out, out2)
		}

		c, err := ContainerFromFile(file)
		if err != nil {
			checkKind(t, err)
			return
		}
		mustRender(t, c)
		c.Unsupported()
		if _, err := c.PodmanRunArgs(); err != nil {
			checkKind(t, err)
		}
		checkAgainstPodman(t, data, c)
	}
}

func checkKind(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnitContext) {
		t.Fatalf("error %v wraps none of the sentinels", err)
	}
}
