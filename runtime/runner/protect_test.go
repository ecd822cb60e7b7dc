package runner

import (
	"slices"
	"testing"
)

func TestSanitizeGitConfig(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		removed        []string
	}{
		{"init's own", "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n",
			"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n", nil},
		{"remotes and branches", "[remote \"origin\"]\n\turl = https://example.org/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch.main]\n\tremote = origin\n",
			"[remote \"origin\"]\n\turl = https://example.org/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch.main]\n\tremote = origin\n", nil},
		{"programs", "[core]\n\tbare = false\n\thooksPath = x\n\tFSMonitor = touch y\n\tsshCommand = z\n[alias]\n\tst = !sh\n[filter \"lfs\"]\n\tclean = c\n",
			"[core]\n\tbare = false\n[alias]\n[filter \"lfs\"]\n", []string{"core.hookspath", "core.fsmonitor", "core.sshcommand", "alias.st", "filter.*.clean"}},
		{"include and continuation", "[include]\n\tpath = /workspace/evil\n[core]\n\tpager = less \\\n  -R\n\tbare = true\n",
			"[include]\n[core]\n\tbare = true\n", []string{"include.path", "core.pager"}},
		{"a key on the header's line", "[core] hooksPath = x\n", "[core]\n", []string{"core hooksPath = x"}},
		{"worktree config", "[extensions]\n\tworktreeConfig = true\n\tobjectFormat = sha1\n", "[extensions]\n\tobjectFormat = sha1\n", []string{"extensions.worktreeconfig"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, removed := sanitizeGitConfig(tc.in)
			if got != tc.want || !slices.Equal(removed, tc.removed) {
				t.Errorf("sanitizeGitConfig(%q) =\n%q %q\nwant\n%q %q", tc.in, got, removed, tc.want, tc.removed)
			}
			if again, more := sanitizeGitConfig(got); again != got || len(more) != 0 {
				t.Errorf("not idempotent: %q %q", again, more)
			}
		})
	}
}
