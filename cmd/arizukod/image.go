package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/arizuko/arizukod/agentimage"
	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/runtime/engine"
)

const imageUsage = `usage: arizukod image <verb> [flags]

verbs:
  build claude              make ` + "localhost/arizuko-claude:VERSION" + ` (Claude Code and its runner) on the engine
  import-static --tag REF BINARY
                            make image REF from one static binary, which becomes its entrypoint`

func cmdImage(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprintf(os.Stderr, "arizukod image: give a verb\n\n%s\n", imageUsage)
		return errUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(os.Stderr, imageUsage)
		return nil
	}
	switch args[0] {
	case "import-static":
		return imageImportStatic(ctx, args[1:])
	case "build":
		return imageBuild(ctx, args[1:])
	}
	fmt.Fprintf(os.Stderr, "arizukod image: unknown verb %q\n\n%s\n", args[0], imageUsage)
	return errUsage
}

func imageImportStatic(ctx context.Context, args []string) error {
	fs := newFlags("image import-static", "--tag REF BINARY")
	var ef engineFlags
	tag := fs.String("tag", config.DefaultImage, "image reference to create")
	ef.register(fs)
	cfgPath := configFlag(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	eng, info, err := openEngine(ctx, ef, *cfgPath)
	if err != nil {
		return err
	}
	if err := engine.ImportStatic(ctx, eng, *tag, fs.Arg(0)); err != nil {
		return err
	}
	fmt.Printf("imported %s into %s %s at %s\n", *tag, info.Name, info.Version, info.Socket)
	return nil
}

func imageBuild(ctx context.Context, args []string) error {
	fs := newFlags("image build", "claude [--runner PATH] [--cache-dir DIR]")
	var ef engineFlags
	runner := fs.String("runner", defaultRunner(), "the arizuko-claude runner binary to put in the image")
	cache := fs.String("cache-dir", defaultCacheDir(), "where the Debian rootfs and Claude Code's package are kept between builds")
	ef.register(fs)
	cfgPath := configFlag(fs)
	if len(args) > 0 && slices.Contains([]string{"-h", "-help", "--help"}, args[0]) {
		return parseFlags(fs, args[:1])
	}
	if len(args) == 0 || args[0] != "claude" {
		if len(args) > 0 {
			fmt.Fprintf(fs.Output(), "arizukod image build: unknown image %q: the one image it builds is claude\n", args[0])
		}
		fs.Usage()
		return errUsage
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	eng, info, err := openEngine(ctx, ef, *cfgPath)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "building %s on %s %s: Debian %s rootfs by debootstrap (cached in %s), Claude Code %s from npm (checked by SHA-512), the runner %s\n",
		agentimage.ClaudeRef, info.Name, info.Version, "bookworm", *cache, agentimage.ClaudeVersion, *runner)
	b, err := agentimage.BuildClaude(ctx, eng, agentimage.Options{CacheDir: *cache, Runner: *runner, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		return err
	}
	fmt.Printf("built %s (%d MB rootfs) in %s\n", b.Ref, b.Bytes>>20, b.Duration.Round(time.Second))
	switch r := b.Replaced; {
	case r.ID != "" && r.Kept == nil:
		fmt.Printf("removed the image it replaces (%s)\n", shortID(r.ID))
	case r.ID != "":
		fmt.Fprintf(os.Stderr, "arizukod image build: the image it replaces (%s) stays: %v; remove it once no container uses it: %s rmi %s\n",
			shortID(r.ID), r.Kept, info.Name, shortID(r.ID))
	}
	return nil
}

// openEngine is the engine of the daemon's configuration (the flags, then its engine and
// engine_socket, then the environment, then the default sockets), which must answer.
func openEngine(ctx context.Context, ef engineFlags, configPath string) (engine.Engine, engine.Info, error) {
	cfg, err := config.Load(serviceMode(), configPath, os.Getenv)
	if err != nil {
		return nil, engine.Info{}, err
	}
	return ef.open(ctx, cfg)
}

// configFlag is --config of a command that uses the daemon's engine.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "", "the daemon's configuration file, whose engine and engine_socket apply (default: as arizukod serve)")
}

// defaultRunner is the runner beside this binary (a build tree's bin/), else the packaged one.
func defaultRunner() string {
	if exe, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(exe), "arizuko-claude"); fileExists(p) {
			return p
		}
	}
	return "/usr/libexec/arizuko/arizuko-claude"
}

// defaultCacheDir is $ARIZUKO_CACHE_DIR, else /var/cache/arizuko for root, else
// $XDG_CACHE_HOME/arizuko.
func defaultCacheDir() string {
	if d := os.Getenv("ARIZUKO_CACHE_DIR"); d != "" {
		return d
	}
	if os.Getuid() == 0 {
		return "/var/cache/arizuko"
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "arizuko")
	}
	return filepath.Join(os.TempDir(), "arizuko-cache")
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// shortID is an image id as the engines' CLIs show it: 12 hex digits, without "sha256:".
func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	return id[:min(12, len(id))]
}
