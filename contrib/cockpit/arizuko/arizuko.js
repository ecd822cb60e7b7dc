/* arizuko.js: arizukod's page in Cockpit.
 *
 * It talks to the daemon's API on its unix socket through Cockpit's own channels (no new
 * listener, no new credentials): with superuser "try" an administrator's requests go
 * through Cockpit's root bridge, others' as themselves (members of the arizuko group may
 * use the API). A run's log is read from the journal (ARIZUKO_RUN_ID=) with journalctl
 * through Cockpit. Actions (kill a run, unpark a group, pause or resume a task) are shown
 * to users Cockpit lets administer the system.
 *
 * The page is a list of panels, each with a load (what it asks the API) and a render;
 * a new panel is one more entry of PANELS, a new column of the runs one more entry of
 * RUN_COLUMNS. What the groups cost comes from GET /v1/usage, a run's phases (its trace's
 * spans, in milliseconds) from GET /v1/runs/{id}.
 */
"use strict";

const SOCKET = "/run/arizuko/arizukod.sock";
const POLL_MS = 3000;
const HISTORY_MS = 30000;
const HISTORY_LIMIT = 10000;
const CHART_DAYS = 14;
const DAY_MS = 86400000;
const RUN_ID = /^[A-Za-z0-9_.-]{1,128}$/;

const api = cockpit.http({ unix: SOCKET, superuser: "try" });

const state = {
    health: null,
    groups: [],
    inbox: {}, // folder -> GET /v1/groups/{folder}/messages
    runs: [],
    history: [],
    historyAt: 0,
    backlog: null,
    parkedOutbox: [],
    tasks: [],
    usage: null, // GET /v1/usage: this month, by group and model
    admin: false,
    selected: null, // run id whose log is shown
    notice: "",
};

// ---- helpers --------------------------------------------------------------------------------

// h builds an element: attributes (on* are listeners), then children (strings are text).
function h(tag, attrs, ...children) {
    const svg = ["svg", "g", "rect", "text", "line", "title"].includes(tag);
    const el = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
        if (v === undefined || v === null || v === false)
            continue;
        if (k.startsWith("on"))
            el.addEventListener(k.slice(2), v);
        else
            el.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
        if (c === undefined || c === null || c === false)
            continue;
        el.append(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
    }
    return el;
}

// apiError turns a failed request into the API's own message (its {"error": ...} body).
function apiError(ex, body) {
    if (body) {
        try {
            const b = JSON.parse(body);
            if (b && b.error)
                return b.error;
        } catch (_) { /* not the API's error body */ }
    }
    if (ex && ex.problem === "not-found")
        return SOCKET + " does not exist: is arizukod.socket enabled and started?";
    if (ex && ex.problem === "access-denied")
        return "no access to " + SOCKET + ": log in as an administrator or a member of the group arizuko";
    return (ex && (ex.message || ex.problem)) || String(ex);
}

function request(method, path, params) {
    return new Promise((resolve, reject) => {
        api.request({ method, path, params: params || {}, body: "" })
                .then(body => resolve(body), (ex, body) => reject(new Error(apiError(ex, body))));
    });
}

const getJSON = (path, params) => request("GET", path, params).then(b => JSON.parse(b));

function tokens(u) {
    if (!u)
        return 0;
    return (u.inputTokens || 0) + (u.outputTokens || 0) + (u.cacheReadTokens || 0) + (u.cacheWriteTokens || 0);
}

function fmtInt(n) {
    return Number(n || 0).toLocaleString("en-US");
}

function fmtDuration(ms) {
    if (!(ms >= 0))
        return "";
    const s = Math.round(ms / 1000);
    if (s < 60)
        return s + "s";
    if (s < 3600)
        return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
    return Math.floor(s / 3600) + "h" + String(Math.floor(s / 60) % 60).padStart(2, "0") + "m";
}

function fmtTime(iso) {
    if (!iso)
        return "";
    const d = new Date(iso);
    return d.toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

const ms = iso => (iso ? Date.parse(iso) : 0);
const dayKey = t => new Date(t).toISOString().slice(0, 10);
const open = run => run.state === "queued" || run.state === "running";

// duration of a run: queued -> waiting so far, running -> so far, ended -> start to end.
function runDuration(r) {
    const now = Date.now();
    if (r.state === "queued")
        return "queued " + fmtDuration(now - ms(r.createdAt));
    if (!r.startedAt)
        return "";
    return fmtDuration((r.endedAt ? ms(r.endedAt) : now) - ms(r.startedAt));
}

// act runs an action and shows what it did, or why not.
function act(what, promise) {
    state.notice = what + "…";
    renderNotice();
    promise.then(() => {
        state.notice = what + ": done";
    }, err => {
        state.notice = what + ": " + err.message;
    }).then(() => {
        renderNotice();
        refresh();
    });
}

// ---- loading -------------------------------------------------------------------------------

function loadHealth() {
    // /health answers 503 with its body while degraded: show that body too.
    return new Promise(resolve => {
        api.get("/health").then(b => resolve(JSON.parse(b)), (ex, body) => {
            try {
                resolve(JSON.parse(body));
            } catch (_) {
                resolve({ status: "unreachable", error: apiError(ex, body) });
            }
        });
    }).then(hr => { state.health = hr });
}

function loadGroups() {
    return getJSON("/v1/groups").then(b => {
        state.groups = b.groups || [];
        return Promise.all(state.groups.map(g =>
            getJSON("/v1/groups/" + encodeURIComponent(g.folder) + "/messages", { limit: 1 })
                    .then(ib => { state.inbox[g.folder] = ib }, () => { delete state.inbox[g.folder] })));
    });
}

function loadRuns() {
    return getJSON("/v1/runs", { limit: 50 }).then(b => { state.runs = b.runs || [] });
}

function loadHistory() {
    if (Date.now() - state.historyAt < HISTORY_MS)
        return Promise.resolve();
    return getJSON("/v1/runs", { limit: HISTORY_LIMIT }).then(b => {
        state.history = b.runs || [];
        state.historyAt = Date.now();
    });
}

// The backlog is /metrics' arizukod_outbox_backlog (pending rows); the rows listed are the
// parked ones (GET /v1/outbox?state=parked: a listing, which leases nothing).
function loadOutbox() {
    return Promise.all([
        request("GET", "/metrics").then(text => {
            const m = /^arizukod_outbox_backlog (\d+)/m.exec(text);
            state.backlog = m ? Number(m[1]) : null;
        }),
        getJSON("/v1/outbox", { state: "parked", limit: 100 }).then(b => { state.parkedOutbox = b.items || [] }),
    ]);
}

function loadTasks() {
    return getJSON("/v1/tasks").then(b => { state.tasks = b.tasks || [] });
}

function loadUsage() {
    const now = new Date();
    const month = now.getFullYear() + "-" + String(now.getMonth() + 1).padStart(2, "0") + "-01";
    return getJSON("/v1/usage", { since: month }).then(b => { state.usage = b });
}

// fmtCost is a Cost of the API: its dollars, "at least" when a model had no price.
function fmtCost(c) {
    if (!c)
        return "—";
    return (c.unpriced && c.unpriced.length ? "at least " : "") + c.usd;
}

// usagePanel: what each group and its subtree cost today and this month, and by model.
function usagePanel() {
    const u = state.usage;
    if (!u)
        return h("p", { class: "muted" }, "…");
    if (!(u.groups || []).length)
        return h("p", { class: "muted" }, "No model usage this month.");
    return h("div", { id: "usage" },
             h("p", {}, "This month: ", h("strong", { id: "usage-total" }, fmtCost(u.total)),
               h("span", { class: "muted" }, " (prices as of " + u.pricesAsOf + ")")),
             h("table", {},
               h("thead", {}, h("tr", {}, ["group", "today", "this month", "subtree today", "subtree this month"].map(t => h("th", {}, t)))),
               h("tbody", {}, u.groups.map(g => h("tr", { "data-folder": g.folder },
                                                   h("td", {}, g.folder), h("td", {}, fmtCost(g.today)), h("td", {}, fmtCost(g.month)),
                                                   h("td", {}, fmtCost(g.subtreeToday)), h("td", {}, fmtCost(g.subtreeMonth)))))),
             h("table", {},
               h("thead", {}, h("tr", {}, ["model", "input", "output", "cache read", "cache write", "cost"].map(t => h("th", {}, t)))),
               h("tbody", {}, (u.models || []).map(m => h("tr", {},
                                                           h("td", {}, m.model), h("td", {}, fmtInt(m.inputTokens)), h("td", {}, fmtInt(m.outputTokens)),
                                                           h("td", {}, fmtInt(m.cacheReadTokens)), h("td", {}, fmtInt(m.cacheWriteTokens)),
                                                           h("td", {}, m.cost ? fmtCost(m.cost) : "no price"))))));
}

// PHASES are a run's phases as GET /v1/runs/{id} names them, in the turn's order.
const PHASES = [["queueWaitMs", "queue"], ["prepareMs", "prepare"], ["createMs", "create"], ["startMs", "start"], ["runMs", "run"], ["finishMs", "finish"]];

// phasesLine: where a run's turn spent its time (its trace's phases).
function phasesLine(p) {
    if (!p)
        return null;
    const parts = PHASES.filter(([k]) => p[k] !== undefined && p[k] !== null).map(([k, name]) => name + " " + fmtInt(p[k]) + " ms");
    if (p.sidecarsMs)
        parts.push("(sidecars " + fmtInt(p.sidecarsMs) + " ms of prepare)");
    return h("p", { class: "phases" }, "phases: " + parts.join(" · "));
}

// ---- panels -----------------------------------------------------------------------------------

function groupsPanel() {
    const children = {};
    const folders = new Set(state.groups.map(g => g.folder));
    for (const g of state.groups) {
        const p = g.parent && folders.has(g.parent) ? g.parent : "";
        (children[p] = children[p] || []).push(g);
    }
    const today = dayKey(Date.now());
    const todayTokens = {};
    const running = {};
    for (const r of state.runs) {
        if (open(r))
            running[r.folder] = (running[r.folder] || 0) + 1;
    }
    for (const r of state.history) {
        if (r.createdAt && dayKey(ms(r.createdAt)) === today)
            todayTokens[r.folder] = (todayTokens[r.folder] || 0) + tokens(r.usage);
    }
    const node = g => {
        const ib = state.inbox[g.folder] || {};
        const parked = ib.parkedReason;
        const kids = (children[g.folder] || []).sort((a, b) => a.folder.localeCompare(b.folder));
        return h("li", { "data-folder": g.folder },
                 h("div", { class: "group" + (parked ? " parked" : "") },
                   h("span", { class: "folder" }, g.folder),
                   g.name && g.name !== g.folder ? h("span", { class: "muted" }, g.name) : null,
                   h("span", { class: "muted" }, "tier " + g.tier),
                   h("span", { class: "tokens" }, fmtInt(todayTokens[g.folder]) + " tokens today"),
                   running[g.folder] ? h("span", { class: "badge running" }, running[g.folder] + " open") : null,
                   (ib.pending || []).length ? h("span", { class: "badge" }, "inbox waiting") : null,
                   parked ? h("span", { class: "badge parked", title: parked }, "parked") : null,
                   parked ? h("span", { class: "reason" }, parked) : null,
                   parked && state.admin
                       ? h("button", {
                           class: "unpark",
                           onclick: () => act("unpark " + g.folder, request("POST", "/v1/groups/" + encodeURIComponent(g.folder) + "/unpark"))
                       }, "Unpark")
                       : null),
                 kids.length ? h("ul", {}, kids.map(node)) : null);
    };
    const roots = (children[""] || []).sort((a, b) => a.folder.localeCompare(b.folder));
    return roots.length ? h("ul", { class: "tree", id: "groups" }, roots.map(node)) : h("p", { class: "muted" }, "No groups yet (arizukod groups add FOLDER).");
}

// The runs' columns: a header and a cell per run.
const RUN_COLUMNS = [
    { title: "run", cell: r => h("a", { href: "#", class: "run-id", onclick: e => { e.preventDefault(); selectRun(r.id) } }, r.id) },
    { title: "group", cell: r => r.folder },
    { title: "kind", cell: r => r.kind + (r.taskId ? " " + r.taskId : "") },
    { title: "state", cell: r => h("span", { class: "state " + r.state }, r.state + (r.status ? " · " + r.status : "") + (r.failure ? " · " + r.failure : "")) },
    { title: "started", cell: r => fmtTime(r.startedAt || r.createdAt) },
    { title: "duration", cell: r => runDuration(r) },
    {
        title: "tokens",
        cell: r => r.usage
            ? h("span", { class: "tokens", title: "input " + fmtInt(r.usage.inputTokens) + ", output " + fmtInt(r.usage.outputTokens) + ", cache read " + fmtInt(r.usage.cacheReadTokens) + ", cache write " + fmtInt(r.usage.cacheWriteTokens) + (r.usage.model ? ", " + r.usage.model : "") },
                fmtInt(tokens(r.usage)), h("span", { class: "muted" }, " (" + fmtInt(r.usage.inputTokens) + " in, " + fmtInt(r.usage.outputTokens) + " out)"))
            : h("span", { class: "muted" }, "—")
    },
    {
        title: "",
        cell: r => open(r) && state.admin
            ? h("button", { class: "kill danger", onclick: () => act("kill " + r.id, request("DELETE", "/v1/runs/" + encodeURIComponent(r.id))) }, "Kill")
            : null
    },
];

function runsPanel() {
    if (!state.runs.length)
        return h("p", { class: "muted" }, "No runs yet.");
    return h("table", { id: "runs" },
             h("thead", {}, h("tr", {}, RUN_COLUMNS.map(c => h("th", {}, c.title)))),
             h("tbody", {}, state.runs.map(r => h("tr", { "data-run": r.id, "data-state": r.state, class: r.id === state.selected ? "selected" : "" },
                                                  RUN_COLUMNS.map(c => h("td", {}, c.cell(r)))))));
}

const PALETTE = ["#0066cc", "#f0ab00", "#3e8635", "#c9190b", "#8476d1", "#009596", "#ec7a08", "#6a6e73"];

// chartPanel: tokens per group per day (all four kinds), stacked, over CHART_DAYS days.
function chartPanel() {
    const now = Date.now();
    const days = [];
    for (let i = CHART_DAYS - 1; i >= 0; i--)
        days.push(dayKey(now - i * DAY_MS));
    const per = {}; // day -> folder -> tokens
    const folders = new Set();
    for (const r of state.history) {
        const t = tokens(r.usage);
        if (!t || !r.createdAt)
            continue;
        const d = dayKey(ms(r.createdAt));
        if (!days.includes(d))
            continue;
        folders.add(r.folder);
        per[d] = per[d] || {};
        per[d][r.folder] = (per[d][r.folder] || 0) + t;
    }
    if (!folders.size)
        return h("p", { class: "muted" }, "No tokens used in the last " + CHART_DAYS + " days.");
    const order = [...folders].sort();
    const color = f => PALETTE[order.indexOf(f) % PALETTE.length];
    const max = Math.max(...days.map(d => Object.values(per[d] || {}).reduce((a, b) => a + b, 0)));
    const W = 720;
    const H = 180;
    const left = 60;
    const bottom = 20;
    const bw = (W - left) / days.length;
    const y = v => (H - bottom) * (1 - v / max);
    const bars = [];
    days.forEach((d, i) => {
        let base = 0;
        for (const f of order) {
            const v = (per[d] || {})[f] || 0;
            if (!v)
                continue;
            bars.push(h("rect", { x: left + i * bw + 2, y: y(base + v), width: bw - 4, height: y(base) - y(base + v), fill: color(f), class: "bar", "data-folder": f, "data-day": d },
                        h("title", {}, d + " " + f + ": " + fmtInt(v) + " tokens")));
            base += v;
        }
        if ((days.length - 1 - i) % 2 === 0)
            bars.push(h("text", { x: left + i * bw + bw / 2, y: H - 5, "text-anchor": "middle", class: "axis" }, d.slice(5)));
    });
    return h("div", { id: "chart" },
             h("svg", { viewBox: "0 0 " + W + " " + H, width: "100%", role: "img", "aria-label": "tokens per group per day" },
               h("line", { x1: left, y1: H - bottom, x2: W, y2: H - bottom, class: "axis-line" }),
               h("text", { x: left - 6, y: 12, "text-anchor": "end", class: "axis" }, fmtInt(max)),
               h("text", { x: left - 6, y: H - bottom, "text-anchor": "end", class: "axis" }, "0"),
               bars),
             h("div", { class: "legend" }, order.map(f => h("span", {}, h("span", { class: "swatch " + "c" + (order.indexOf(f) % PALETTE.length) }), f))));
}

function outboxPanel() {
    const rows = state.parkedOutbox;
    return h("div", { id: "outbox" },
             h("p", {}, h("span", { class: "big", id: "backlog" }, state.backlog === null ? "?" : fmtInt(state.backlog)),
               " pending (not yet acknowledged by a gateway), ",
               h("span", { class: "big" }, fmtInt(rows.length)), " parked"),
             rows.length
                 ? h("table", {},
                     h("thead", {}, h("tr", {}, ["id", "group", "target", "kind", "attempts", "last error", ""].map(t => h("th", {}, t)))),
                     h("tbody", {}, rows.map(o => h("tr", {},
                                                    h("td", {}, String(o.id)), h("td", {}, o.folder), h("td", {}, o.target), h("td", {}, o.kind),
                                                    h("td", {}, String(o.attempts)), h("td", { class: "reason" }, o.lastError),
                                                    h("td", {}, state.admin ? h("button", { onclick: () => act("retry outbox row " + o.id, request("POST", "/v1/outbox/" + o.id + "/retry")) }, "Retry") : null)))))
                 : null);
}

function tasksPanel() {
    if (!state.tasks.length)
        return h("p", { class: "muted" }, "No scheduled tasks.");
    const verb = t => (t.state === "active" ? "pause" : t.state === "paused" ? "resume" : "");
    return h("table", { id: "tasks" },
             h("thead", {}, h("tr", {}, ["task", "group", "schedule", "state", "next run", "last run", ""].map(t => h("th", {}, t)))),
             h("tbody", {}, state.tasks.map(t => h("tr", {},
                                                   h("td", { title: t.prompt }, t.id), h("td", {}, t.folder), h("td", {}, t.scheduleKind + " " + t.schedule),
                                                   h("td", {}, t.state), h("td", {}, fmtTime(t.nextRunAt)), h("td", {}, fmtTime(t.lastRunAt)),
                                                   h("td", {}, state.admin && verb(t)
                                                       ? h("button", { onclick: () => act(verb(t) + " task " + t.id, request("POST", "/v1/tasks/" + encodeURIComponent(t.id) + "/" + verb(t))) }, verb(t) === "pause" ? "Pause" : "Resume")
                                                       : null)))));
}

// PANELS, in the page's order. load is what the panel needs from the API (shared loads run
// once per refresh); render returns its content.
const PANELS = [
    { id: "groups-panel", title: "Groups", load: [loadGroups, loadHistory], render: groupsPanel },
    { id: "runs-panel", title: "Runs", load: [loadRuns], render: runsPanel },
    { id: "log-panel", title: "Run log", load: [], render: () => logPanel.el },
    { id: "usage-panel", title: "What it costs", load: [loadUsage], render: usagePanel },
    { id: "chart-panel", title: "Tokens per group per day", load: [loadHistory], render: chartPanel },
    { id: "outbox-panel", title: "Outbox backlog", load: [loadOutbox], render: outboxPanel },
    { id: "tasks-panel", title: "Scheduled tasks", load: [loadTasks], render: tasksPanel },
];

// ---- the run log: the run's journal entries, followed while it runs ----------------------------

const logPanel = {
    el: h("div", { id: "log" }, h("p", { class: "muted" }, "Choose a run to see its journal (journalctl ARIZUKO_RUN_ID=…).")),
    proc: null,
};

function selectRun(id) {
    if (!RUN_ID.test(id))
        return;
    state.selected = id;
    if (logPanel.proc)
        logPanel.proc.close("cancelled");
    const lines = h("pre", { class: "journal", id: "journal" });
    const detail = h("div", { class: "detail" });
    logPanel.el.replaceChildren(h("h3", {}, "run " + id), detail, lines);
    getJSON("/v1/runs/" + encodeURIComponent(id)).then(r => {
        const u = r.usage;
        detail.replaceChildren(...[
            h("p", {}, r.folder + " · " + r.kind + " · " + r.state + (r.status ? " · " + r.status : "") + " · " + runDuration(r) +
                (u ? " · " + fmtInt(tokens(u)) + " tokens (" + fmtInt(u.inputTokens) + " in, " + fmtInt(u.outputTokens) + " out, " + fmtInt(u.cacheReadTokens) + " cache read, " + fmtInt(u.cacheWriteTokens) + " cache write" + (u.model ? ", " + u.model : "") + ")" : "")),
            phasesLine(r.phases),
            r.error ? h("p", { class: "reason" }, r.error) : null,
            r.result ? h("p", {}, "result: " + r.result) : null,
            (r.egress || []).length ? h("p", { class: "muted" }, "egress: " + r.egress.map(e => e.host + " " + e.requests + " requests").join(", ")) : null,
        ].filter(Boolean));
        follow(id, !open(r), lines);
    }, err => detail.replaceChildren(h("p", { class: "error" }, err.message)));
    renderPanels();
}

function follow(id, ended, lines) {
    const args = ["journalctl", "--no-pager", "--output=json", "--lines=500", "ARIZUKO_RUN_ID=" + id];
    if (!ended)
        args.push("--follow");
    let buf = "";
    let n = 0;
    const proc = cockpit.spawn(args, { superuser: "try", err: "message" });
    logPanel.proc = proc;
    proc.stream(chunk => {
        buf += chunk;
        const parts = buf.split("\n");
        buf = parts.pop();
        for (const p of parts) {
            if (!p)
                continue;
            let e;
            try {
                e = JSON.parse(p);
            } catch (_) {
                continue;
            }
            let msg = e.MESSAGE;
            if (Array.isArray(msg))
                msg = new TextDecoder().decode(new Uint8Array(msg));
            const t = new Date(Number(e.__REALTIME_TIMESTAMP) / 1000);
            const who = e._SYSTEMD_USER_UNIT || e._SYSTEMD_UNIT || e.SYSLOG_IDENTIFIER || "";
            lines.append(h("span", { class: "p" + (e.PRIORITY || "6") }, t.toLocaleTimeString() + " " + who + ": " + msg + "\n"));
            n++;
        }
    });
    proc.then(() => {
        if (!n)
            lines.append(h("span", { class: "muted" }, "(no journal entries with ARIZUKO_RUN_ID=" + id + ")\n"));
    }, ex => {
        if (ex && ex.problem !== "cancelled")
            lines.append(h("span", { class: "error" }, "journalctl: " + (ex.message || ex.problem) + "\n"));
    });
}

// ---- rendering ----------------------------------------------------------------------------------

function renderNotice() {
    const el = document.getElementById("access");
    el.textContent = (state.admin ? "administrative access: actions enabled" : "limited access: turn on administrative access in Cockpit for the actions") +
        (state.notice ? " — " + state.notice : "");
}

function renderHealth() {
    const hr = state.health;
    const el = document.getElementById("health");
    if (!hr) {
        el.textContent = "connecting…";
        return;
    }
    el.className = "health " + hr.status;
    el.textContent = hr.status === "unreachable"
        ? hr.error
        : "arizukod " + (hr.version || "") + " · " + hr.status + " · " + (hr.running || 0) + " running, " + (hr.queued || 0) + " queued · engine " +
            (hr.engine && hr.engine.up ? (hr.engine.name || "") + " " + (hr.engine.version || "") : "down" + (hr.engine && hr.engine.error ? ": " + hr.engine.error : "")) +
            (hr.model && hr.model.error ? " · model: " + hr.model.error : "");
}

function renderPanels() {
    const main = document.getElementById("panels");
    for (const p of PANELS) {
        let sec = document.getElementById(p.id);
        if (!sec) {
            sec = h("section", { id: p.id }, h("h2", {}, p.title), h("div", { class: "body" }));
            main.append(sec);
        }
        const body = sec.querySelector(".body");
        const content = p.render();
        // Only what changed is replaced: a button is not swapped under the pointer.
        if (body.firstChild !== content && !(body.firstChild && body.firstChild.isEqualNode(content)))
            body.replaceChildren(content);
    }
}

// ---- the loop -----------------------------------------------------------------------------------

let refreshing = null;

function refresh() {
    if (refreshing)
        return refreshing;
    const loads = new Set([loadHealth]);
    for (const p of PANELS)
        p.load.forEach(l => loads.add(l));
    refreshing = Promise.all([...loads].map(l => l().then(() => null, err => err)))
            .then(errs => {
                const failed = errs.filter(Boolean);
                const el = document.getElementById("error");
                el.hidden = !failed.length;
                el.textContent = failed.length ? failed[0].message : "";
                renderHealth();
                renderNotice();
                renderPanels();
            })
            .finally(() => { refreshing = null });
    return refreshing;
}

function start() {
    const superuser = cockpit.dbus(null, { bus: "internal" }).proxy("cockpit.Superuser", "/superuser");
    const update = () => {
        // Current is the superuser bridge in use ("sudo", ...), "none", or "init" while unknown.
        state.admin = Boolean(superuser.valid && superuser.Current && superuser.Current !== "none" && superuser.Current !== "init");
        renderNotice();
        renderPanels();
    };
    superuser.addEventListener("changed", update);
    superuser.wait(update);
    refresh();
    window.setInterval(refresh, POLL_MS);
}

cockpit.transport.wait(start);
