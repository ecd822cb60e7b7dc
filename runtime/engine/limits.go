package engine

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Labels every container of arizukod carries, so that cleanup finds exactly its own.
const (
	LabelInstance = "io.arizuko.instance"
	LabelFolder   = "io.arizuko.folder"
	LabelRun      = "io.arizuko.run"
	LabelRole     = "io.arizuko.role"
	// LabelPrepared marks an agent container created ahead of its turn; its value is the
	// key of the spec it was made from. It has no LabelRun: no run owned it when it was made.
	LabelPrepared = "io.arizuko.prepared"
	// LabelWarm marks a prepared container started ahead of its turn (a warm agent): one
	// that no run claims after a crash is no run's remains.
	LabelWarm = "io.arizuko.warm"
)

// The network modes a container may get besides a named network. Which of them an
// engine has is the engine's business (Info.Networks); the names are the same on every
// engine.
const (
	NetworkNone        = "none"
	NetworkBridge      = "bridge"
	NetworkSlirp4netns = "slirp4netns"
	NetworkPasta       = "pasta"
)

// Limits are the resources of one container: the daemon's defaults ([limits] of
// arizukod.toml), a group's own, and what a turn gets.
type Limits struct {
	MemoryBytes int64
	NanoCPUs    int64
	PidsLimit   int64
	Network     string // as CheckNetwork returns it
	// Runtime is the OCI runtime (CheckRuntime); "" is the engine's default.
	Runtime string
}

// DefaultLimits are the limits of a container when nobody set any: 1 GiB of memory, two
// CPUs, 512 pids, no network.
func DefaultLimits() Limits {
	return Limits{MemoryBytes: 1 << 30, NanoCPUs: 2e9, PidsLimit: 512, Network: NetworkNone}
}

// Or returns l with each field that is not set (zero) taken from def.
func (l Limits) Or(def Limits) Limits {
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = def.MemoryBytes
	}
	if l.NanoCPUs <= 0 {
		l.NanoCPUs = def.NanoCPUs
	}
	if l.PidsLimit <= 0 {
		l.PidsLimit = def.PidsLimit
	}
	if l.Network == "" {
		l.Network = def.Network
	}
	if l.Runtime == "" {
		l.Runtime = def.Runtime
	}
	return l
}

// MinMemory is the smallest memory limit Docker accepts.
const MinMemory = 6 << 20

// ParseMemory parses a memory size: a whole number of bytes, optionally
// followed by k, m or g (powers of 1024, either case), of at least
// MinMemory.
func ParseMemory(s string) (int64, error) {
	digits, shift := s, 0
	if s != "" {
		switch s[len(s)-1] {
		case 'k', 'K':
			shift = 10
		case 'm', 'M':
			shift = 20
		case 'g', 'G':
			shift = 30
		}
		if shift > 0 {
			digits = s[:len(s)-1]
		}
	}
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, fmt.Errorf("%q: not a memory size (like \"512m\" or \"1g\")", s)
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("%q: too large", s)
	}
	n <<= shift
	if n < MinMemory {
		return 0, fmt.Errorf("%q: below the minimum of 6m", s)
	}
	return n, nil
}

// DefaultRlimits are explicit, so that a container never inherits limits the host refuses.
func DefaultRlimits() []Rlimit {
	return []Rlimit{{"nofile", 1024, 1024}, {"nproc", 4096, 4096}}
}
