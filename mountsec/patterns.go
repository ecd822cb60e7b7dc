package mountsec

import (
	"fmt"
	"path/filepath"
	"strings"
)

var builtinBlocked = []string{
	// SSH, GPG and cloud/cluster credentials.
	".ssh", ".gnupg", ".gpg", ".aws", ".azure", ".gcloud", ".kube", ".docker",
	".config/gcloud", ".config/gh", ".config/hub", ".config/rclone",
	".terraform.d", ".terraformrc", ".vault-token", ".boto", ".s3cfg", ".dockercfg",
	// Container engines' and arizuko's own configuration and state.
	".config/containers", ".local/share/containers", ".config/systemd", ".config/pub",
	// Agent credentials.
	".claude", ".claude.json", ".codex", ".credentials.json",
	// Dotenv files and credential stores.
	".env", ".env.*", ".netrc", "_netrc", ".npmrc", ".pypirc", ".git-credentials",
	".pgpass", ".my.cnf", ".htpasswd", ".authinfo", ".authinfo.*", ".password-store",
	".local/share/keyrings", ".cargo/credentials", ".cargo/credentials.toml",
	"credentials", "credentials.json", "auth.json",
	// Private keys.
	"id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
	"*.pem", "*.key", "*.p12", "*.pfx", "*.ppk", "*.jks", "*.keystore", "*.kdbx",
	// Host system locations.
	"/proc", "/sys", "/dev", "/boot", "/run", "/var/run",
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
	"/etc/sudoers", "/etc/sudoers.d", "/etc/ssh", "/etc/ssl/private",
	"/etc/arizuko", "/etc/containers", "/etc/docker", "/etc/systemd",
	"/var/lib/containers", "/var/lib/docker",
	"/tmp/ssh-*", "/tmp/.x11-unix", "/tmp/systemd-private-*",
}

// pattern is a compiled blocked pattern.
type pattern struct {
	src      string
	builtin  bool
	anchored bool
	parts    []string
}

func (p pattern) describe() string {
	if p.builtin {
		return fmt.Sprintf("built-in pattern %q", p.src)
	}
	return fmt.Sprintf("allowlist pattern %q", p.src)
}

// compilePattern checks and compiles src. home expands a leading "~/".
func compilePattern(src, home string, builtin bool) (pattern, error) {
	if src == "" {
		return pattern{}, fmt.Errorf("empty pattern")
	}
	for i := 0; i < len(src); i++ {
		if c := src[i]; c < 0x20 || c >= 0x7f || c == '\\' {
			return pattern{}, fmt.Errorf("pattern %q: only printable ASCII without '\\' is allowed", src)
		}
	}
	p := pattern{src: src, builtin: builtin}
	body := src
	switch {
	case body == "~" || strings.HasPrefix(body, "~/"):
		if home == "" {
			return pattern{}, fmt.Errorf("pattern %q: home directory unknown", src)
		}
		body = home + body[1:]
		p.anchored = true
	case strings.HasPrefix(body, "~"):
		return pattern{}, fmt.Errorf("pattern %q: only ~/ (the service user's home) is supported", src)
	case strings.HasPrefix(body, "/"):
		p.anchored = true
	}
	if p.anchored {
		body = strings.TrimPrefix(body, "/")
	}
	if body == "" {
		return pattern{}, fmt.Errorf("pattern %q matches everything", src)
	}
	for _, part := range strings.Split(body, "/") {
		if part == "" || part == "." || part == ".." {
			return pattern{}, fmt.Errorf("pattern %q: empty, '.' or '..' component", src)
		}
		if _, err := filepath.Match(part, ""); err != nil {
			return pattern{}, fmt.Errorf("pattern %q: %w", src, err)
		}
		p.parts = append(p.parts, strings.ToLower(part))
	}
	return p, nil
}

// matchPart reports whether the lowercased component c matches glob g.
func matchPart(g, c string) bool {
	ok, _ := filepath.Match(g, c)
	return ok
}

func matchRun(parts, comps []string) bool {
	for i, g := range parts {
		if !matchPart(g, comps[i]) {
			return false
		}
	}
	return true
}

// blocks reports whether the path with folded components comps is the
// pattern's location or inside it.
func (p pattern) blocks(comps []string) bool {
	if len(comps) < len(p.parts) {
		return false
	}
	if p.anchored {
		return matchRun(p.parts, comps)
	}
	for i := 0; i+len(p.parts) <= len(comps); i++ {
		if matchRun(p.parts, comps[i:]) {
			return true
		}
	}
	return false
}

// contains reports whether the path with folded components comps is a strict
// ancestor of the anchored pattern's location.
func (p pattern) contains(comps []string) bool {
	return p.anchored && len(comps) < len(p.parts) && matchRun(p.parts[:len(comps)], comps)
}

// components splits an absolute clean path into its components ("/" has none).
func components(path string) []string {
	path = strings.TrimPrefix(path, "/")
	if path == "" {
		return nil
	}
	return strings.Split(path, "/")
}

// fold prepares components for blocked-pattern matching: lowercased, with
// trailing dots and spaces removed (some filesystems ignore them).
func fold(comps []string) []string {
	out := make([]string, len(comps))
	for i, c := range comps {
		if t := strings.TrimRight(c, ". "); t != "" {
			c = t
		}
		out[i] = strings.ToLower(c)
	}
	return out
}

// within reports whether comps equals base or lies inside it (whole components).
func within(comps, base []string) bool {
	if len(comps) < len(base) {
		return false
	}
	for i := range base {
		if comps[i] != base[i] {
			return false
		}
	}
	return true
}
