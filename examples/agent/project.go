package main

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/arizuko/arizukod/contract"
)

// projectDir is where a group with a project finds its working tree (package project).
const projectDir = "/workspace/project"

// projectCommand tries, from inside the turn, what an agent must not do to the operator's
// repository, and commits a file on its own branch without a git binary (this image has
// none): each attempt's outcome ("ok" or the error), and the commit it made. arg is a path
// on the host that a hook would create if the host ever ran one.
func projectCommand(_ contract.Input, arg string) contract.Output {
	folder := os.Getenv("ARIZUKO_FOLDER")
	gitDir := filepath.Join(projectDir, ".git")
	hook := []byte("#!/bin/sh\ntouch " + arg + "\n")
	try := func(err error) string {
		if err != nil {
			return err.Error()
		}
		return "ok"
	}
	refOf := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(gitDir, "refs", "heads", name))
		return strings.TrimSpace(string(b))
	}
	tip := refOf("arizuko/" + folder)
	out := map[string]string{
		"write config": try(os.WriteFile(filepath.Join(gitDir, "config"), []byte("[core]\n\tfsmonitor = touch "+arg+"\n"), 0o644)),
		"rename over config": try(func() error {
			tmp := filepath.Join(gitDir, "config.new")
			if err := os.WriteFile(tmp, []byte("[core]\n\thooksPath = hooks\n"), 0o644); err != nil {
				return err
			}
			return os.Rename(tmp, filepath.Join(gitDir, "config"))
		}()),
		"write alternates":          try(os.WriteFile(filepath.Join(gitDir, "objects", "info", "alternates"), []byte("/etc\n"), 0o644)),
		"write repository objects":  try(os.WriteFile("/var/lib/arizuko/project-objects/planted", []byte("x"), 0o644)),
		"remove repository objects": try(os.RemoveAll("/var/lib/arizuko/project-objects/pack")),
		"add hooks": try(func() error {
			if err := os.MkdirAll(filepath.Join(gitDir, "hooks"), 0o755); err != nil {
				return err
			}
			for _, h := range []string{"reference-transaction", "post-update", "pre-upload", "post-checkout"} {
				if err := os.WriteFile(filepath.Join(gitDir, "hooks", h), hook, 0o755); err != nil {
					return err
				}
			}
			return nil
		}()),
		"move main":          try(writeRef(gitDir, "main", tip)),
		"move another group": try(writeRef(gitDir, "arizuko/other", tip)),
	}
	commit, err := commitFile(gitDir, folder, tip, "from-agent.txt", "written by the example agent\n")
	out["commit"] = try(err)
	out["hash"] = commit
	return report(out)
}

func writeRef(gitDir, branch, hash string) error {
	p := filepath.Join(gitDir, "refs", "heads", filepath.FromSlash(branch))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(hash+"\n"), 0o644)
}

// writeObject stores a loose object as git does: zlib of "<kind> <size>\0<body>", named by
// its SHA-1.
func writeObject(gitDir, kind string, body []byte) (string, error) {
	raw := append([]byte(fmt.Sprintf("%s %d\x00", kind, len(body))), body...)
	sum := sha1.Sum(raw)
	id := hex.EncodeToString(sum[:])
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write(raw)
	w.Close()
	dir := filepath.Join(gitDir, "objects", id[:2])
	if _, err := os.Stat(filepath.Join(dir, id[2:])); err == nil {
		return id, nil // objects are read-only and named by their content: it is there
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return id, os.WriteFile(filepath.Join(dir, id[2:]), z.Bytes(), 0o444)
}

// commitFile commits a tree of one file on top of parent and moves the group's branch to it.
func commitFile(gitDir, folder, parent, name, content string) (string, error) {
	blob, err := writeObject(gitDir, "blob", []byte(content))
	if err != nil {
		return "", err
	}
	id, _ := hex.DecodeString(blob)
	tree, err := writeObject(gitDir, "tree", append([]byte("100644 "+name+"\x00"), id...))
	if err != nil {
		return "", err
	}
	now := fmt.Sprintf("%d +0000", time.Now().Unix())
	body := "tree " + tree + "\n"
	if parent != "" {
		body += "parent " + parent + "\n"
	}
	body += "author agent <agent@example.invalid> " + now + "\ncommitter agent <agent@example.invalid> " + now + "\n\nadd " + name + "\n"
	commit, err := writeObject(gitDir, "commit", []byte(body))
	if err != nil {
		return "", err
	}
	return commit, writeRef(gitDir, "arizuko/"+folder, commit)
}

// projectSwapCommand moves the project's .git away (its read-only binds go with it) and
// puts a .git of its own in its place, whose config, hooks and alternates would run
// commands on the host or read its files if the host's git trusted them. arg is the
// host path such a command would create.
func projectSwapCommand(_ contract.Input, arg string) contract.Output {
	gitDir := filepath.Join(projectDir, ".git")
	if err := os.Rename(gitDir, gitDir+"-away"); err != nil {
		return fail("move .git: %v", err)
	}
	touch := "touch " + arg
	files := map[string]string{
		"config":                      "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = " + touch + "\n\thooksPath = hooks\n[uploadpack]\n\tpackObjectsHook = " + touch + "\n",
		"HEAD":                        "ref: refs/heads/main\n",
		"objects/info/alternates":     "/etc\n",
		"hooks/pre-upload":            "#!/bin/sh\n" + touch + "\n",
		"hooks/reference-transaction": "#!/bin/sh\n" + touch + "\n",
	}
	for name, text := range files {
		p := filepath.Join(gitDir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fail("%s: %v", name, err)
		}
		if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
			return fail("%s: %v", name, err)
		}
	}
	if err := os.MkdirAll(filepath.Join(gitDir, "refs", "heads"), 0o755); err != nil {
		return fail("refs: %v", err)
	}
	return ok("swapped")
}
