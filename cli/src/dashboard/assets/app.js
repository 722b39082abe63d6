// The Mote dashboard: renders the host's state from server-sent events and sends messages.
"use strict";

const token = new URLSearchParams(location.search).get("token");
const withToken = (url) =>
  token ? url + (url.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token) : url;
const $ = (id) => document.getElementById(id);

let selected = null;
let last = null; // the previous state, for rates
const MAX_FEED = 200;

function bytes(n) {
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + " MiB";
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(0) + " KiB";
  return n + " B";
}

function cell(row, cls, text) {
  const td = row.insertCell();
  td.className = cls;
  td.textContent = text;
  return td;
}

function renderState(state) {
  const previous = new Map();
  if (last) for (const a of last.state.actors) previous.set(a.path + "#" + a.incarnation, a);
  const seconds = last ? Math.max(state.uptime_s - last.state.uptime_s, 0.001) : 1;
  const body = $("tree").tBodies[0];
  const rows = document.createDocumentFragment();
  for (const a of state.actors) {
    const row = document.createElement("tr");
    row.dataset.path = a.path;
    if (a.path === selected) row.classList.add("selected");
    const depth = a.path.split("/").length - 2;
    const before = previous.get(a.path + "#" + a.incarnation);
    const rate = before ? (a.received - before.received) / seconds : 0;
    const name = cell(row, "path", a.path);
    name.style.paddingLeft = 0.5 + depth * 1.2 + "rem";
    cell(row, "module", a.module + (a.version ? "@" + a.version : ""));
    cell(row, "mailbox n", a.mailbox_depth);
    cell(row, "rate n", rate.toFixed(rate < 10 ? 1 : 0));
    cell(row, "received n", a.received);
    cell(row, "sent n", a.sent);
    cell(row, "failures n" + (a.failures ? " some" : ""), a.failures);
    cell(row, "restarts n" + (a.restarts ? " some" : ""), a.restarts);
    cell(row, "memory n", bytes(a.memory));
    cell(row, "cpu n", (a.cpu_ns / 1e6).toFixed(1) + " ms");
    row.addEventListener("click", () => select(a.path));
    rows.appendChild(row);
  }
  body.replaceChildren(rows);
  $("truncated").textContent = state.truncated ? `(${state.truncated} quieter actors not shown)` : "";
  $("host").textContent =
    `${state.live} live · ${state.dead_letters} dead letters · up ${Math.round(state.uptime_s)} s`;
  const modules = $("modules");
  modules.replaceChildren(
    ...state.modules.map((m) => {
      const li = document.createElement("li");
      li.textContent = `${m.name}@${m.version}${m.current ? " (current)" : ""}${m.image ? " cow-image" : ""} sha256:${m.hash.slice(0, 16)}`;
      return li;
    })
  );
  $("tasks-panel").hidden = state.tasks.length === 0;
  $("tasks").replaceChildren(
    ...state.tasks.map((t) => {
      const li = document.createElement("li");
      li.textContent = t.label + " ";
      const bar = document.createElement("progress");
      if (t.total !== null) {
        bar.max = t.total;
        bar.value = t.done;
      }
      li.append(bar, ` ${t.done}${t.total !== null ? "/" + t.total : ""} · ${(t.elapsed_ms / 1000).toFixed(1)} s`);
      return li;
    })
  );
  last = { state };
  if (selected) renderDetail(state.actors.find((a) => a.path === selected));
}

function renderDetail(a) {
  const dl = $("detail");
  if (!a) {
    dl.replaceChildren();
    return;
  }
  const rows = [
    ["incarnation", a.incarnation],
    ["module", a.module + "@" + a.version],
    ["mailbox", `${a.mailbox_depth} (${bytes(a.mailbox_bytes)})`],
    ["received / sent", `${a.received} / ${a.sent}`],
    ["failures / restarts", `${a.failures} / ${a.restarts}`],
    ["steps committed", a.committed],
    ["state (linear memory)", bytes(a.memory)],
    ["cpu", (a.cpu_ns / 1e6).toFixed(2) + " ms"],
    ["refusals", a.refusals.map(([k, n]) => `${k}=${n}`).join(" ") || "none"],
  ];
  dl.replaceChildren(
    ...rows.flatMap(([k, v]) => {
      const dt = document.createElement("dt");
      dt.textContent = k;
      const dd = document.createElement("dd");
      dd.textContent = v;
      return [dt, dd];
    })
  );
}

async function select(path) {
  selected = path;
  $("detail-path").textContent = path;
  $("send-to").value = path;
  for (const row of $("tree").tBodies[0].rows) row.classList.toggle("selected", row.dataset.path === path);
  const response = await fetch(withToken("api/actor?path=" + encodeURIComponent(path)));
  if (!response.ok) return;
  const detail = await response.json();
  renderDetail(detail.actor);
  $("detail-failures").replaceChildren(...detail.failures.map(feedItem));
}

function feedItem(item) {
  const li = document.createElement("li");
  li.className = item.type;
  if (item.type === "supervision") {
    li.textContent = `${item.path} #${item.incarnation} ${item.kind}: ${item.error} → ${item.directive}`;
  } else if (item.type === "deadletter") {
    li.textContent = `dead letter ${item.kind} to ${item.target} (${item.reason}) from ${item.sender ?? "outside"}`;
  } else if (item.type === "finished") {
    li.textContent = `${item.label}: ${item.outcome} in ${(item.elapsed_ms / 1000).toFixed(1)} s`;
  } else {
    li.textContent = `${item.dead_letters} dead letters not shown`;
  }
  return li;
}

function pushFeed(item) {
  const feed = $("feed");
  feed.prepend(feedItem(item));
  while (feed.children.length > MAX_FEED) feed.lastChild.remove();
  if (item.type === "supervision" && item.path === selected) $("detail-failures").append(feedItem(item));
}

function connect() {
  const events = new EventSource(withToken("api/events"));
  events.addEventListener("open", () => $("conn").classList.add("live"));
  events.addEventListener("error", () => $("conn").classList.remove("live"));
  events.addEventListener("state", (e) => renderState(JSON.parse(e.data)));
  events.addEventListener("supervision", (e) => pushFeed(JSON.parse(e.data)));
  events.addEventListener("deadletter", (e) => pushFeed(JSON.parse(e.data)));
  events.addEventListener("finished", (e) => pushFeed(JSON.parse(e.data)));
}

$("send").addEventListener("submit", async (e) => {
  e.preventDefault();
  const status = $("send-status");
  const message = { to: $("send-to").value.trim(), kind: $("send-kind").value.trim() };
  message[$("send-encoding").value] = $("send-body").value;
  status.className = "";
  status.textContent = "sending…";
  try {
    const response = await fetch(withToken("api/send"), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(message),
    });
    const outcome = await response.json();
    status.className = outcome.ok ? "" : "error";
    status.textContent = outcome.ok ? `sent ${message.kind} to ${message.to}` : outcome.error;
  } catch (error) {
    status.className = "error";
    status.textContent = String(error);
  }
});

connect();
