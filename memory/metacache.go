package memory

import (
	"io/fs"
	"sync"
	"syscall"
)

// maxCachedMetas bounds the frontmatter kept between assemblies (a few hundred bytes
// each); past it the cache starts over.
const maxCachedMetas = 10000

// fileKey identifies one version of a file: a write changes its size, modification or
// change time, a rename or a replacement its change time or inode.
type fileKey struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

type cachedMeta struct {
	m   meta
	err error
}

// metaCache remembers the frontmatter of episodes whose name carries no date, the one
// layer that needs a file's content to learn whether it is injected: an unchanged file
// costs a stat instead of an open, a read and a YAML parse.
var metaCache = struct {
	sync.Mutex
	m map[fileKey]cachedMeta
}{m: map[fileKey]cachedMeta{}}

// dirStat stats the names of one directory of the group.
type dirStat struct {
	stat, lstat func(name string) (fs.FileInfo, error)
	close       func()
}

// statIn returns a stat of names in dir: relative to the directory opened once when the
// group is read through its descriptor (no walk from the root per name), through fsys
// otherwise.
func (a *assembler) statIn(dir string) dirStat {
	if r, ok := a.fsys.(rootFS); ok {
		if sub, err := r.dir.Dir(dir); err == nil {
			s := rootFS{sub}
			return dirStat{stat: s.Stat, lstat: s.Lstat, close: func() { sub.Close() }}
		}
	}
	return dirStat{
		stat:  func(name string) (fs.FileInfo, error) { return fs.Stat(a.fsys, dir+"/"+name) },
		lstat: func(name string) (fs.FileInfo, error) { return fs.Lstat(a.fsys, dir+"/"+name) },
		close: func() {},
	}
}

// cachedReadMeta is readMeta of p (name in the directory stat looks in) through metaCache,
// when the file's stat identifies it as a regular file; otherwise p is read every time.
func (a *assembler) cachedReadMeta(stat dirStat, name, p string) (meta, error) {
	fi, err := stat.stat(name)
	if err != nil {
		// Gone, or a symlink: readMeta says why it cannot be read.
		return a.readMeta(p)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() {
		return a.readMeta(p)
	}
	k := fileKey{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
	metaCache.Lock()
	c, hit := metaCache.m[k]
	metaCache.Unlock()
	if hit {
		return c.m, c.err
	}
	m, err := a.readMeta(p)
	metaCache.Lock()
	if len(metaCache.m) >= maxCachedMetas {
		clear(metaCache.m)
	}
	metaCache.m[k] = cachedMeta{m, err}
	metaCache.Unlock()
	return m, err
}
