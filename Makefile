# arizukod: build, test and package. Every go command runs with the Podman bindings' tags
# (build and vet need none; they add a test that decodes through the bindings' specgen).
SHELL := /bin/bash
GO_TAGS := remote,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper,containers_image_openpgp
export GOFLAGS := -tags=$(GO_TAGS)
export CGO_ENABLED := 0
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: all build agent claude-runner claude-image demo test unit lint bench clean

all: build

build: agent claude-runner
	go build -trimpath -ldflags '$(LDFLAGS)' -o bin/arizukod ./cmd/arizukod

agent:
	go build -trimpath -ldflags '-s -w' -o bin/agent ./examples/agent

claude-runner:
	go build -trimpath -ldflags '-s -w' -o bin/arizuko-claude ./cmd/arizuko-claude

# localhost/arizuko-claude:VERSION on the detected engine: debootstrap and npm downloads,
# cached in /var/cache/arizuko (or $$ARIZUKO_CACHE_DIR).
claude-image: build
	bin/arizukod image build claude

# The quickstart's main job: one real turn in a real container, the reply printed.
demo:
	bash hack/demo.sh

# The whole suite on the real test host (what CI runs).
test:
	bash hack/test.sh

# The unit suite: no service started; the *_e2e_test.go tests skip with the reason.
unit:
	go test ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt: $$out"; exit 1; }
	go vet ./...

bench:
	bash hack/bench.sh

clean:
	rm -rf bin dist

# Packages from the binaries of `build` (packaging/README.md): dist/arizukod_VERSION-1_ARCH.deb
# (debhelper, then lintian) and dist/arizukod-VERSION-1.ARCH.rpm (rpmbuild, then rpmlint),
# their units checked with systemd-analyze verify. hack/systemtest.sh installs the .deb on
# a booted Debian.
.PHONY: deb rpm packages

deb: build
	bash packaging/deb/build.sh

rpm: build
	bash packaging/rpm/build.sh

packages: deb rpm
