#!/usr/bin/env bash
# stage.sh deb|rpm DIR: lay the package's files out under DIR as they are installed.
#
# Needs bin/arizukod, bin/agent and bin/arizuko-claude (make build). Debian 12 keeps system units in
# /lib/systemd/system, RPM distributions in /usr/lib/systemd/system. Only the Debian
# package ships the preset that enables both sockets (Debian enables a service when it
# is installed); on RPM distributions their own presets decide (Fedora: disabled).
# Documentation and licences are left to each package format (docs/, copyright, %doc).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	echo "usage: packaging/stage.sh deb|rpm DIR" >&2
	exit 2
}
flavour=${1:-}
dest=${2:-}
[[ -n $dest ]] || usage
case $flavour in
deb) unitdir=/lib/systemd/system ;;
rpm) unitdir=/usr/lib/systemd/system ;;
*) usage ;;
esac

for f in bin/arizukod bin/agent bin/arizuko-claude; do
	[[ -x $f ]] || {
		echo "stage.sh: $f is missing: run make build first" >&2
		exit 1
	}
done

# The packaged arizukod.toml must document every key of the daemon's own sample
# (config/testdata/arizukod.toml), so that the two cannot drift apart unnoticed.
keys() { sed -nE 's/^#?([a-z_]+) = .*/\1/p; s/^\[([a-z_]+)\]$/[\1]/p' "$1" | sort -u; }
if [[ -f config/testdata/arizukod.toml ]]; then
	missing=$(comm -23 <(keys config/testdata/arizukod.toml) <(keys packaging/arizukod.toml))
	[[ -z $missing ]] || {
		echo "stage.sh: packaging/arizukod.toml lacks keys of config/testdata/arizukod.toml: ${missing//$'\n'/ }" >&2
		exit 1
	}
fi

rm -rf "$dest"
inst() { install -D -m "$1" "$2" "$dest$3"; }

inst 0755 bin/arizukod /usr/bin/arizukod
inst 0755 bin/agent /usr/libexec/arizuko/agent
inst 0755 bin/arizuko-claude /usr/libexec/arizuko/arizuko-claude
inst 0755 packaging/add-subids /usr/libexec/arizuko/add-subids
inst 0755 contrib/systemd/arizuko-podman-service /usr/libexec/arizuko/podman-service

for u in arizukod.socket arizukod.service arizuko-podman.socket arizuko-podman.service; do
	inst 0644 "contrib/systemd/$u" "$unitdir/$u"
done
for u in arizukod.socket arizukod.service; do
	inst 0644 "contrib/systemd/user/$u" "/usr/lib/systemd/user/$u"
done
inst 0644 contrib/systemd/sysusers.d/arizuko.conf /usr/lib/sysusers.d/arizuko.conf
inst 0644 contrib/systemd/tmpfiles.d/arizuko.conf /usr/lib/tmpfiles.d/arizuko.conf
if [[ $flavour == deb ]]; then
	inst 0644 contrib/systemd/system-preset/80-arizukod.preset /lib/systemd/system-preset/80-arizukod.preset
fi

inst 0644 packaging/arizukod.toml /etc/arizuko/arizukod.toml
inst 0644 contrib/systemd/podman/containers.conf /etc/arizuko/podman/containers.conf
inst 0644 contrib/systemd/podman/storage.conf /etc/arizuko/podman/storage.conf

inst 0644 docs/man/arizukod.8 /usr/share/man/man8/arizukod.8
inst 0644 docs/man/arizukod.toml.5 /usr/share/man/man5/arizukod.toml.5

# The bundled skills: plain files, read-only for everyone.
while IFS= read -r -d '' f; do
	inst 0644 "$f" "/usr/share/arizuko/skills/${f#container/skills/}"
done < <(find container/skills -type f -print0 | sort -z)

# The Cockpit page (contrib/cockpit): plain files Cockpit serves once it is installed.
for f in manifest.json index.html arizuko.js arizuko.css; do
	inst 0644 "contrib/cockpit/arizuko/$f" "/usr/share/cockpit/arizuko/$f"
done

# Documentation, the same for both formats.
doc=/usr/share/doc/arizukod
inst 0644 README.md "$doc/README.md"
inst 0644 ARCHITECTURE.md "$doc/ARCHITECTURE.md"
inst 0644 contrib/systemd/README.md "$doc/README.systemd.md"
inst 0644 packaging/mount-allowlist.example.json "$doc/examples/mount-allowlist.json"
if [[ $flavour == rpm ]]; then
	inst 0644 LICENSE /usr/share/licenses/arizukod/LICENSE
fi

# The binary links its Go modules statically: name each with its licence text, read from
# the module cache the binary was built from.
go_modules() {
	local gobin=${GO:-go} modcache goroot kind path version esc
	local -a lic
	command -v "$gobin" >/dev/null 2>&1 || gobin=/usr/local/go/bin/go
	modcache=$("$gobin" env GOMODCACHE)
	goroot=$("$gobin" env GOROOT)
	echo "arizukod is statically linked with the Go standard library and these Go modules."
	echo "Each is followed by the licence and notice files found in its module."
	printf '\n==== Go standard library %s\n\n' "$("$gobin" version -m bin/arizukod | sed -n '1s/.*: //p')"
	cat "$goroot/LICENSE"
	"$gobin" version -m bin/arizukod | while read -r kind path version _; do
		[[ $kind == dep || $kind == '=>' ]] || continue
		printf '\n==== %s %s\n\n' "$path" "$version"
		# The module cache spells upper-case letters as '!' and the lower-case letter.
		esc=$(printf '%s' "$path" | sed -E 's/([A-Z])/!\L\1/g')
		mapfile -t lic < <(find "$modcache/$esc@$version" -maxdepth 1 -type f \( -iname 'licen[cs]e*' \
			-o -iname 'unlicen[cs]e*' -o -iname 'copying*' -o -iname 'notice*' \) 2>/dev/null | sort)
		if [[ ${#lic[@]} -gt 0 ]]; then
			cat "${lic[@]}"
		else
			echo "(no licence file found in the module cache at build time)"
		fi
	done
}
go_modules >"$dest/go-modules.txt"
inst 0644 "$dest/go-modules.txt" "$doc/go-modules.txt"
rm "$dest/go-modules.txt"
