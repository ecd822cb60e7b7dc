# shellcheck shell=bash
# cockpit.sh: the Cockpit page of the package in a real browser, sourced by
# hack/systemtest.sh (which defines ct, pass, fail, now, since, LOGS, ST_DIR, RUN, API_SOCK).
#
# cockpit_prepare (before the boot): builds hack/systemtest/fakemodel, installs chromium,
# chromium-driver and python3-selenium on this machine when missing, and checks that port
# 9090 is free (the container shares this machine's network, so its cockpit.socket listens
# here).
#
# cockpit_check (on the booted system with groups main, tools and broken): points the daemon
# at the scripted model upstream on this machine's loopback (a test drop-in: the packaged
# unit has no network at all), installs cockpit-ws, cockpit-bridge and cockpit-system from
# the mirror, makes the login user olivia in the group sudo (the administrators on Debian),
# runs turns that use the model (tokens), parks the group broken (an inbox message its
# failing sidecar refuses), starts a long turn, then hack/systemtest/cockpit_check.py logs in
# to cockpit-ws on https://127.0.0.1:9090 with headless Chromium, opens /arizuko and checks
# what the page shows and that its kill and unpark work; the API confirms both afterwards.
# Screenshots: $LOGS/cockpit-*.png (docs/cockpit.png is one of them).

COCKPIT_PORT=9090
COCKPIT_USER=olivia
COCKPIT_PASSWORD=arizuko-systemtest-9090
# Debian's own python3, which python3-selenium is for (a pyenv's python3 may come first in PATH).
PY=/usr/bin/python3
FAKEMODEL_PID=

cockpit_prepare() {
	local t need=()
	t=$(now)
	rm -f "$LOGS"/cockpit-*
	FAKEMODEL_BIN=$ST_DIR/fakemodel
	bash -c '. hack/env.sh && go build -trimpath -o "$1" ./hack/systemtest/fakemodel' _ "$FAKEMODEL_BIN" >"$LOGS/fakemodel-build.log" 2>&1 ||
		die "building hack/systemtest/fakemodel failed: $(tail -n 20 "$LOGS/fakemodel-build.log")"
	command -v chromium >/dev/null || need+=(chromium)
	command -v chromedriver >/dev/null || need+=(chromium-driver)
	"$PY" -c 'import selenium' 2>/dev/null || need+=(python3-selenium)
	if [[ ${#need[@]} -gt 0 ]]; then
		say "installing ${need[*]} (the browser of the Cockpit check)"
		pkg_install "${need[@]}" >"$LOGS/browser-install.log" 2>&1 || die "installing ${need[*]} failed: $(tail -n 20 "$LOGS/browser-install.log")"
	fi
	! ss -Hltn "sport = :$COCKPIT_PORT" | grep -q . ||
		die "port $COCKPIT_PORT is in use on this machine; the container's cockpit.socket needs it: $(ss -Hltnp "sport = :$COCKPIT_PORT")"
	pass "cockpit: fake model, browser" "$(since "$t")" "$(chromium --version 2>/dev/null), selenium $("$PY" -c 'import selenium; print(selenium.__version__)')"
}

# cockpit_stop ends what cockpit_check started on this machine (the cleanup calls it).
cockpit_stop() {
	if [[ -n $FAKEMODEL_PID ]]; then
		kill "$FAKEMODEL_PID" 2>/dev/null || true
		wait "$FAKEMODEL_PID" 2>/dev/null || true
		FAKEMODEL_PID=
	fi
	rm -rf --one-file-system "$ST_DIR/chromium"
}

# api_get PATH prints the body of GET PATH on the daemon's socket, as root in the container.
api_get() { ct curl -sS --fail-with-body --max-time 30 --unix-socket "$API_SOCK" "http://d$1"; }

cockpit_check() {
	local t url out model_runs=() id r total sleep_id broken_before broken_after state n
	t=$(now)
	"$FAKEMODEL_BIN" >"$LOGS/fakemodel.url" 2>"$LOGS/fakemodel.log" &
	FAKEMODEL_PID=$!
	for _ in $(seq 50); do
		url=$(head -n 1 "$LOGS/fakemodel.url")
		[[ -n $url ]] && break
		sleep 0.1
	done
	[[ $url == http://127.0.0.1:* ]] || fail "cockpit: fake model" "no URL from $FAKEMODEL_BIN: $(cat "$LOGS/fakemodel.log")"
	install -D -m 0644 /dev/stdin "$RUN/etc/systemd/system/arizukod.service.d/systemtest-model.conf" <<EOF
# hack/systemtest/cockpit.sh: the scripted model upstream on the loopback, for turns with usage.
[Service]
Environment=ARIZUKO_MODEL_UPSTREAM=$url ANTHROPIC_API_KEY=sk-ant-systemtest
EOF
	ct systemctl daemon-reload
	ct systemctl restart arizukod.service
	for _ in $(seq 1 120); do
		out=$(ct curl -sS --max-time 10 --unix-socket "$API_SOCK" -o /dev/null -w '%{http_code}' http://d/health 2>&1 || true)
		[[ $out == 200 ]] && break
		sleep 0.5
	done
	[[ $out == 200 ]] || fail "cockpit: daemon with the fake model" "GET /health: $out"
	pass "cockpit: daemon -> fake model" "$(since "$t")" "upstream $url (test drop-in arizukod.service.d/systemtest-model.conf)"

	t=$(now)
	CT_TIMEOUT=600 ct apt-get install -y -q --no-install-recommends -o APT::Keep-Downloaded-Packages=true \
		cockpit-ws cockpit-bridge cockpit-system sudo >"$LOGS/apt-cockpit.log" 2>&1 ||
		fail "cockpit: apt-get install" "$(tail -n 20 "$LOGS/apt-cockpit.log")"
	ct test -f /usr/share/cockpit/arizuko/manifest.json || fail "cockpit: the page" "/usr/share/cockpit/arizuko/manifest.json is missing"
	ct systemctl enable --now cockpit.socket >/dev/null 2>&1 || fail "cockpit: cockpit.socket" "$(ct systemctl status cockpit.socket 2>&1 | tail -n 5)"
	ct useradd -m -s /bin/bash -G sudo "$COCKPIT_USER"
	printf '%s:%s\n' "$COCKPIT_USER" "$COCKPIT_PASSWORD" | ct chpasswd
	n=$(grep -o '[0-9]* newly installed' "$LOGS/apt-cockpit.log" | cut -d' ' -f1)
	pass "cockpit: install, admin user" "$(since "$t")" "$n packages ($(ct dpkg-query -W -f '${Version}' cockpit-ws)); $COCKPIT_USER in sudo"

	# Turns that use the model, in two groups of a tree; a parked group; a long turn.
	t=$(now)
	out=$(ct arizukod groups add main/support 2>&1) || fail "groups add main/support" "$out"
	for f in main main/support main; do
		CT_TIMEOUT=180 ct arizukod run --folder "$f" --message "model hello from the cockpit test" >"$LOGS/run-model.json" 2>&1 ||
			fail "cockpit: a turn with the model" "$(cat "$LOGS/run-model.json")"
		id=$(sed -n 's/^  "id": "\([^"]*\)".*/\1/p' "$LOGS/run-model.json" | head -n 1)
		r=$(api_get "/v1/runs/$id") || fail "cockpit: GET /v1/runs/$id" "$r"
		total=$("$PY" -c 'import json,sys; u=json.load(sys.stdin).get("usage") or {}; print(sum(u.get(k,0) for k in ("inputTokens","outputTokens","cacheReadTokens","cacheWriteTokens")))' <<<"$r")
		[[ $total -gt 0 ]] || fail "cockpit: a turn with the model" "run $id has no usage: $r"
		model_runs+=("$id=$total")
	done
	out=$(ct arizukod inbox add broken --message "reply hi" 2>&1) || fail "inbox add broken" "$out"
	for _ in $(seq 1 60); do
		out=$(api_get /v1/groups/broken/messages)
		[[ $out == *'"parkedReason"'* ]] && break
		sleep 0.5
	done
	[[ $out == *'"parkedReason"'* ]] || fail "cockpit: a parked group" "broken is not parked: $out"
	broken_before=$(api_get "/v1/runs?folder=broken" | grep -o '"id"' | wc -l)
	out=$(ct curl -sS --fail-with-body --max-time 30 --unix-socket "$API_SOCK" -H 'Content-Type: application/json' \
		-d '{"folder":"main/support","messages":[{"role":"user","content":"sleep 300s"}]}' http://d/v1/runs) ||
		fail "cockpit: a long turn" "$out"
	sleep_id=$("$PY" -c 'import json,sys; print(json.load(sys.stdin)["id"])' <<<"$out")
	for _ in $(seq 1 120); do
		state=$(api_get "/v1/runs/$sleep_id" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["state"])')
		[[ $state == running ]] && break
		sleep 0.5
	done
	[[ $state == running ]] || fail "cockpit: a long turn" "run $sleep_id is $state"
	pass "cockpit: model turns, parked, running" "$(since "$t")" "runs ${model_runs[*]} (id=tokens); broken parked; $sleep_id running"

	t=$(now)
	mkdir -p "$ST_DIR/chromium/tmp"
	out=$(TMPDIR=$ST_DIR/chromium/tmp HOME=$ST_DIR/chromium timeout 240 "$PY" hack/systemtest/cockpit_check.py \
		--url "https://127.0.0.1:$COCKPIT_PORT" --user "$COCKPIT_USER" --password "$COCKPIT_PASSWORD" \
		--profile "$ST_DIR/chromium/profile" --shots "$LOGS" \
		--groups main,main/support,tools,broken --parked broken --kill "$sleep_id" \
		--runs "$(IFS=,; echo "${model_runs[*]}")" 2>"$LOGS/cockpit-check.log") ||
		fail "cockpit: the page in Chromium" "$(tail -n 30 "$LOGS/cockpit-check.log")"
	# What the API says after the clicks: the run was killed, the group's inbox ran again.
	for _ in $(seq 1 60); do
		state=$(api_get "/v1/runs/$sleep_id" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["state"])')
		broken_after=$(api_get "/v1/runs?folder=broken" | grep -o '"id"' | wc -l)
		[[ $state == killed && $broken_after -gt $broken_before ]] && break
		sleep 0.5
	done
	[[ $state == killed ]] || fail "cockpit: kill from the page" "run $sleep_id is $state"
	[[ $broken_after -gt $broken_before ]] || fail "cockpit: unpark from the page" "no new run of broken after the unpark ($broken_before runs before, $broken_after after)"
	pass "cockpit: page in Chromium, kill, unpark" "$(since "$t")" "$out; API: $sleep_id killed, broken ran again ($broken_before -> $broken_after runs); screenshots $LOGS/cockpit-*.png"
	cockpit_stop
}
