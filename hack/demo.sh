#!/usr/bin/env bash
# demo.sh: the quickstart's main job. Builds arizukod and the example agent, makes sure a
# container engine answers (installing and starting Podman if none does), imports the agent
# image locally (nothing is pulled), runs one real turn in a fresh hardened container and
# prints its result.
#
# Environment: ARIZUKO_DEMO_DIR (/var/tmp/arizuko-demo) holds the turn's data and, without
# systemd, the private Podman service; ARIZUKO_DEMO_IMAGE (localhost/arizuko-agent:latest)
# is the agent image's tag (cmd/arizukod's TestDemo uses one of its own).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/env.sh
. hack/env.sh

MESSAGE=${1:-reply Hello from a fresh, locked-down container!}
DEMO_DIR=${ARIZUKO_DEMO_DIR:-/var/tmp/arizuko-demo}

say() { printf 'demo: %s\n' "$*" >&2; }

say "building bin/arizukod and bin/agent"
go build -trimpath -o bin/arizukod ./cmd/arizukod
go build -trimpath -ldflags='-s -w' -o bin/agent ./examples/agent

engine_answers() { bin/arizukod doctor --check engine >/dev/null 2>&1; }

if [[ -z ${ARIZUKO_ENGINE_SOCKET:-} ]] && ! engine_answers; then
	[[ $(id -u) -eq 0 ]] || { say "no container engine answers; start one (systemctl --user start podman.socket) or run as root"; exit 1; }
	if ! command -v podman >/dev/null 2>&1; then
		say "installing podman"
		if command -v apt-get >/dev/null 2>&1; then
			pkg_install podman runc >/dev/null
		else
			pkg_install podman >/dev/null
		fi
	fi
	if [[ -d /run/systemd/system ]] && [[ $(ps -p 1 -o comm=) == systemd ]]; then
		say "starting podman.socket"
		systemctl enable --now podman.socket
		export ARIZUKO_ENGINE_SOCKET=unix:///run/podman/podman.sock
	else
		# No systemd to socket-activate podman: run its API service ourselves, with private
		# storage. runc and explicit ulimits work where crun or the host's limits do not.
		mkdir -p "$DEMO_DIR"
		cat >"$DEMO_DIR/containers.conf" <<'CONF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
		if [[ -f $DEMO_DIR/podman.pid ]] && kill -0 "$(cat "$DEMO_DIR/podman.pid")" 2>/dev/null; then
			say "using the private podman API service already running in $DEMO_DIR"
		else
			say "starting a private podman API service in $DEMO_DIR"
			rm -f "$DEMO_DIR/podman.sock"
			CONTAINERS_CONF=$DEMO_DIR/containers.conf setsid podman --root "$DEMO_DIR/root" --runroot "$DEMO_DIR/runroot" \
				system service --time=0 "unix://$DEMO_DIR/podman.sock" >"$DEMO_DIR/podman.log" 2>&1 &
			echo $! >"$DEMO_DIR/podman.pid"
		fi
		for _ in $(seq 100); do [[ -S $DEMO_DIR/podman.sock ]] && break; sleep 0.1; done
		export ARIZUKO_ENGINE=podman ARIZUKO_ENGINE_SOCKET=unix://$DEMO_DIR/podman.sock
	fi
fi

# image_id REF: the engine's id of image REF, "" when it has none or curl is missing (the
# engine's Docker-compatible API, which Podman and Docker both serve).
image_id() {
	local sock
	sock=$(bin/arizukod doctor --check engine 2>/dev/null | sed -n 's|.* at unix://||p')
	[[ -n $sock ]] && command -v curl >/dev/null 2>&1 || return 0
	curl -fsS --unix-socket "$sock" "http://engine/images/$1/json" 2>/dev/null | grep -o '"Id": *"[^"]*"' | head -1 | sed 's/.*"\([^"]*\)"$/\1/' || true
}

# Importing makes a new image even from the same binary, and leaves the one the tag named
# before untagged: import only when bin/agent changed, and remove the image it replaces.
AGENT=${ARIZUKO_DEMO_IMAGE:-localhost/arizuko-agent:latest}
mkdir -p "$DEMO_DIR"
agent_sum=$(sha256sum bin/agent | cut -d' ' -f1)
if [[ $(cat "$DEMO_DIR/agent.sha256" 2>/dev/null) == "$agent_sum" ]] &&
	CONTAINER_IMAGE=$AGENT bin/arizukod doctor --check image >/dev/null 2>&1; then
	say "$AGENT is already this bin/agent"
else
	old=$(image_id "$AGENT")
	say "importing the example agent as $AGENT"
	bin/arizukod image import-static --tag "$AGENT" bin/agent >&2
	new=$(image_id "$AGENT")
	if [[ -n $old && $old != "$new" ]]; then
		sock=$(bin/arizukod doctor --check engine 2>/dev/null | sed -n 's|.* at unix://||p')
		curl -fsS -X DELETE --unix-socket "$sock" "http://engine/images/$old" >/dev/null 2>&1 ||
			say "the previous $AGENT ($old) is still in use; remove it later with: podman rmi $old"
	fi
	echo "$agent_sum" >"$DEMO_DIR/agent.sha256"
fi
say "running one turn: $MESSAGE"
status=0
bin/arizukod run --local --data-dir "$DEMO_DIR/data" --image "$AGENT" --folder main --message "$MESSAGE" --skills-dir "$PWD/container/skills" || status=$?
if [[ -f $DEMO_DIR/podman.pid ]] && kill -0 "$(cat "$DEMO_DIR/podman.pid")" 2>/dev/null; then
	say "the private Podman service keeps running for the next steps; point arizukod at it with
      export CONTAINER_HOST=unix://$DEMO_DIR/podman.sock
  and stop it with
      kill \$(cat $DEMO_DIR/podman.pid)"
fi
exit "$status"
