package mountsec

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// ErrBadHostPathMap is wrapped when HOST_DATA_DIR/HOST_APP_DIR or the local
// directories they map are unusable.
var ErrBadHostPathMap = errors.New("invalid host path mapping")

// HostPathMap translates paths as arizukod sees them (inside its own
// container) to the paths the host's engine sees, for a daemon that runs in a
// container and starts sibling containers. The zero value translates nothing.
type HostPathMap struct {
	pairs []pathPair // longest local prefix first
}

type pathPair struct{ local, host string }

// NewHostPathMap maps localData to hostData and localApp to hostApp. An empty
// host side leaves that directory untranslated. All paths must be absolute and
// not "/"; they are cleaned.
func NewHostPathMap(localData, hostData, localApp, hostApp string) (HostPathMap, error) {
	var m HostPathMap
	for _, e := range []struct{ name, local, host string }{
		{"HOST_DATA_DIR", localData, hostData},
		{"HOST_APP_DIR", localApp, hostApp},
	} {
		if e.host == "" {
			continue
		}
		local, err := cleanMapPath(e.name+" local side", e.local)
		if err != nil {
			return HostPathMap{}, err
		}
		host, err := cleanMapPath(e.name, e.host)
		if err != nil {
			return HostPathMap{}, err
		}
		m.pairs = append(m.pairs, pathPair{local: local, host: host})
	}
	if len(m.pairs) == 2 && m.pairs[0].local == m.pairs[1].local && m.pairs[0].host != m.pairs[1].host {
		return HostPathMap{}, fmt.Errorf("mountsec: %w: the data and app directories are both %s but map to different host paths", ErrBadHostPathMap, m.pairs[0].local)
	}
	sort.SliceStable(m.pairs, func(i, j int) bool { return len(m.pairs[i].local) > len(m.pairs[j].local) })
	return m, nil
}

// HostPathMapFromEnv reads HOST_DATA_DIR and HOST_APP_DIR through getenv
// (os.Getenv in production) for the given local directories.
func HostPathMapFromEnv(localData, localApp string, getenv func(string) string) (HostPathMap, error) {
	return NewHostPathMap(localData, getenv("HOST_DATA_DIR"), localApp, getenv("HOST_APP_DIR"))
}

func cleanMapPath(name, p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("mountsec: %w: %s is empty", ErrBadHostPathMap, name)
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("mountsec: %w: %s contains a NUL byte", ErrBadHostPathMap, name)
	case !filepath.IsAbs(p):
		return "", fmt.Errorf("mountsec: %w: %s %q is not absolute", ErrBadHostPathMap, name, p)
	case filepath.Clean(p) == "/":
		return "", fmt.Errorf("mountsec: %w: %s may not be /", ErrBadHostPathMap, name)
	}
	return filepath.Clean(p), nil
}

// Active reports whether any translation is configured.
func (m HostPathMap) Active() bool { return len(m.pairs) > 0 }

// Translate returns the host-side path for local: the longest configured local
// directory that local equals or lies inside (whole components: /data2 is not
// inside /data) is replaced by its host side. Other paths, and paths that are
// not absolute, are returned cleaned but otherwise unchanged.
func (m HostPathMap) Translate(local string) string {
	if !filepath.IsAbs(local) {
		return local
	}
	p := filepath.Clean(local)
	for _, e := range m.pairs {
		if p == e.local {
			return e.host
		}
		if rest, ok := strings.CutPrefix(p, e.local+"/"); ok {
			return e.host + "/" + rest
		}
	}
	return p
}
