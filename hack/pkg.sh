# shellcheck shell=bash
# pkg.sh: installing distribution packages on a machine where another package manager may be
# running (sourced by hack/env.sh and hack/testhost/lib.sh, never run).
#
# A fresh cloud machine often runs unattended-upgrades or cloud-init's apt-get when a script
# starts; apt-get then fails at once with "Could not get lock". Every install of the project
# goes through pkg_install, which waits for the lock (PKG_LOCK_WAIT seconds, default 600) and
# says that it is waiting.

PKG_LOCK_WAIT=${PKG_LOCK_WAIT:-600}

pkg_say() { printf 'pkg: %s\n' "$*" >&2; }

# pkg_apt runs apt-get with dpkg's lock waited for (apt >= 1.9.11 honours DPkg::Lock::Timeout
# for the dpkg frontend lock).
pkg_apt() {
	env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$PKG_LOCK_WAIT" -o Dpkg::Use-Pty=0 "$@"
}

# pkg_apt_update refreshes the package lists. DPkg::Lock::Timeout does not cover the lists
# lock that `apt-get update` takes, so a held lock is retried until PKG_LOCK_WAIT runs out.
pkg_apt_update() {
	local waited=0 out
	while :; do
		if out=$(pkg_apt -q update 2>&1); then
			return 0
		fi
		if ! grep -q 'Could not get lock\|Unable to lock' <<<"$out" || ((waited >= PKG_LOCK_WAIT)); then
			printf '%s\n' "$out" >&2
			return 1
		fi
		((waited % 30 == 0)) && pkg_say "another package manager holds the apt lock; waiting (up to ${PKG_LOCK_WAIT}s)"
		sleep 5
		waited=$((waited + 5))
	done
}

# pkg_install installs the named packages with apt-get (Debian, Ubuntu) or dnf (Fedora),
# refreshing the package lists when they are missing or an install from them fails.
pkg_install() {
	(($# > 0)) || return 0
	if command -v apt-get >/dev/null 2>&1; then
		if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
			pkg_apt_update || return 1
		fi
		pkg_apt -y -q install --no-install-recommends "$@" && return 0
		pkg_say "install of $* failed; refreshing the package lists and retrying"
		pkg_apt_update && pkg_apt -y -q install --no-install-recommends "$@"
	elif command -v dnf >/dev/null 2>&1; then
		# dnf waits for another dnf's lock by itself.
		dnf install -y -q "$@"
	else
		pkg_say "no apt-get or dnf here: install $* by hand"
		return 1
	fi
}
