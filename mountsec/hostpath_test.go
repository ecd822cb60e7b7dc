package mountsec

import (
	"errors"
	"testing"
)

func TestHostPathMap(t *testing.T) {
	m, err := NewHostPathMap("/data", "/srv/arizuko/data/", "/app", "/opt/arizuko")
	if err != nil {
		t.Fatal(err)
	}
	if !m.Active() {
		t.Error("not active")
	}
	for in, want := range map[string]string{
		"/data":                      "/srv/arizuko/data",
		"/data/groups/main":          "/srv/arizuko/data/groups/main",
		"/data2/groups":              "/data2/groups",
		"/dat":                       "/dat",
		"/data/../etc":               "/etc",
		"/data//groups/":             "/srv/arizuko/data/groups",
		"/app/container/skills":      "/opt/arizuko/container/skills",
		"/application":               "/application",
		"/srv/other":                 "/srv/other",
		"relative/data":              "relative/data",
		"/":                          "/",
		"/data/ipc/main/router.sock": "/srv/arizuko/data/ipc/main/router.sock",
	} {
		if got := m.Translate(in); got != want {
			t.Errorf("Translate(%q) = %q, want %q", in, got, want)
		}
	}
	nested, err := NewHostPathMap("/app/data", "/host/data", "/app", "/host/app")
	if err != nil {
		t.Fatal(err)
	}
	if got := nested.Translate("/app/data/x"); got != "/host/data/x" {
		t.Errorf("longest prefix: %q", got)
	}
	if got := nested.Translate("/app/datax"); got != "/host/app/datax" {
		t.Errorf("component match: %q", got)
	}
}

func TestHostPathMapFromEnv(t *testing.T) {
	env := map[string]string{"HOST_DATA_DIR": "/host/data"}
	m, err := HostPathMapFromEnv("/data", "/app", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if m.Translate("/data/x") != "/host/data/x" || m.Translate("/app/x") != "/app/x" {
		t.Errorf("from env: %q %q", m.Translate("/data/x"), m.Translate("/app/x"))
	}
	none, err := HostPathMapFromEnv("/data", "/app", func(string) string { return "" })
	if err != nil || none.Active() || none.Translate("/data/x") != "/data/x" {
		t.Errorf("unset env: %v %v", none, err)
	}
	var zero HostPathMap
	if zero.Translate("/data/x") != "/data/x" {
		t.Error("zero value translates")
	}
}

func TestHostPathMapErrors(t *testing.T) {
	for _, tc := range [][4]string{
		{"", "/host", "", ""},
		{"/data", "relative", "", ""},
		{"/data", "/", "", ""},
		{"/", "/host", "", ""},
		{"/data", "/ho\x00st", "", ""},
		{"/x", "/host/a", "/x", "/host/b"},
	} {
		if _, err := NewHostPathMap(tc[0], tc[1], tc[2], tc[3]); !errors.Is(err, ErrBadHostPathMap) {
			t.Errorf("NewHostPathMap(%q) = %v", tc, err)
		}
	}
}
