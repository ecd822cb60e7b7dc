package engine

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"time"
)

// staticImageDirs are created in a static image so that every mount point of a turn exists
// on the read-only root.
var staticImageDirs = []string{"etc", "tmp", "root", "skills", "workspace", "var", "var/run", "var/run/pub", "var/run/pub/arizuko", "proc", "sys", "dev"}

// StaticRootfs returns a rootfs tar holding one static binary at /<name> and the directories
// a turn mounts onto: the smallest image an agent needs, made without a registry or a build
// tool.
func StaticRootfs(binary string) ([]byte, string, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, "", fmt.Errorf("static image: %w", err)
	}
	name := path.Base(binary)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	for _, d := range staticImageDirs {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: mtime}); err != nil {
			return nil, "", err
		}
	}
	passwd := "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n"
	files := []struct {
		name string
		mode int64
		data []byte
	}{{"etc/passwd", 0o644, []byte(passwd)}, {"etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\n")}, {name, 0o755, data}}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime}); err != nil {
			return nil, "", err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), "/" + name, nil
}

// ImportStatic makes image ref on e from a static binary, whose entrypoint it becomes.
func ImportStatic(ctx context.Context, e Engine, ref, binary string) error {
	tarball, entry, err := StaticRootfs(binary)
	if err != nil {
		return err
	}
	changes := []string{fmt.Sprintf(`ENTRYPOINT ["%s"]`, entry), "WORKDIR /workspace"}
	if err := e.ImportImage(ctx, ref, bytes.NewReader(tarball), changes); err != nil {
		return fmt.Errorf("import %s into the engine: %w", ref, err)
	}
	return nil
}

// Replaced is what ImportReplacing did with the image its reference named before.
type Replaced struct {
	// ID is that image; "" when the reference named none, or names it still.
	ID string
	// Kept says why it was not removed (wrapping ErrImageInUse when a container uses it);
	// nil when it was.
	Kept error
}

// ImportReplacing runs imp, which imports a new image as ref, and then removes the image
// ref named before: an import leaves it untagged, taking its space on every rebuild.
// One a container still uses is kept (Replaced.Kept says so), and so is every one on an
// engine that is no ImageRemover. An error of imp is returned as it is, and nothing is
// removed.
func ImportReplacing(ctx context.Context, e Engine, ref string, imp func() error) (Replaced, error) {
	r, canRemove := e.(ImageRemover)
	old := ""
	if there, err := e.ImageExists(ctx, ref); err == nil && there && canRemove {
		if old, err = r.ImageID(ctx, ref); err != nil {
			return Replaced{}, fmt.Errorf("the image %s names now: %w", ref, err)
		}
	}
	if err := imp(); err != nil {
		return Replaced{}, err
	}
	if !canRemove {
		return Replaced{}, nil
	}
	now, err := r.ImageID(ctx, ref)
	if err != nil {
		return Replaced{}, fmt.Errorf("the image %s names after the import: %w", ref, err)
	}
	if old == "" || old == now {
		return Replaced{}, nil
	}
	return Replaced{ID: old, Kept: r.RemoveImage(ctx, old)}, nil
}
