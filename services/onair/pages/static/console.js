// kotae console: what is on air, the queue and why, recent outcomes, the stages' health (Server-Sent Events
// from /console/stream), and the operator's commands. Each button sends the same control.v1 command as the
// CLI (POST /console/command), with the console's token in the Authorization header — never in the URL or a
// cookie. The token is kept for this tab only (sessionStorage).
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const KEY = "kotae-console-token";
  let state = null;
  let offsetMs = 0;
  let endArmedUntil = 0;

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k.startsWith("data-")) node.setAttribute(k, v);
      else if (k === "onclick") node.addEventListener("click", v);
      else node[k] = v;
    }
    for (const child of children) if (child != null) node.append(child);
    return node;
  }

  function say(text, kind) {
    const m = $("message");
    m.textContent = text;
    m.className = "message " + (kind || "");
  }

  function token() { return sessionStorage.getItem(KEY) || ""; }

  async function send(command, target) {
    const headers = { "Content-Type": "application/json" };
    if (token()) headers.Authorization = "Bearer " + token();
    let reply;
    try {
      reply = await fetch("/console/command", { method: "POST", headers, body: JSON.stringify({ command, target: target || null }) });
    } catch (err) {
      say(`${command}: the stage did not answer (${err.message})`, "error");
      return;
    }
    const body = await reply.json().catch(() => ({}));
    if (reply.ok) say(`${command}${target ? " " + target : ""}: sent as ${body.sent_as} (control stream #${body.seq})`, "ok");
    else say(`${command}: refused (${reply.status}) — ${body.error || reply.statusText}`, "error");
  }

  function tierText(item) {
    if (item.superchat) return `superchat ${item.superchat.amount} ${item.superchat.currency}`;
    return item.tier;
  }

  // The queue's rank key, best first: tier (2 Super Chat, 1 member, 0 everyone), the Super Chat in yen, askers.
  function scoreText(score) {
    const [tier, yen, askers] = score || [];
    return `rank key: tier ${tier} · ¥${yen} · ${askers} asked (then age)`;
  }

  // What the answer cites, by title, and the slide it shows: what the operator approves along with the words.
  function citedText(item) {
    const docs = (item.documents || []).map((d) => `[${d.n}] ${d.title}` + (d.slide != null ? ` (slide ${d.slide})` : ""));
    if (item.slide != null) docs.push(`slide ${item.slide}`);
    return docs.length ? docs.join(" · ") : (item.kind === "thanks" ? "(a thanks cites nothing)" : "–");
  }

  function renderOnAir(air) {
    const box = $("on-air");
    $("skip").disabled = !air;
    if (!air) { box.replaceChildren(el("p", { class: "nothing" }, "(nothing on air)")); return; }
    const left = Math.max(0, (Date.parse(air.ends_at) - (Date.now() + offsetMs)) / 1000);
    const total = Math.max(0.001, (Date.parse(air.ends_at) - Date.parse(air.started_at)) / 1000);
    const bar = el("div", { class: "progress" }, el("div"));
    bar.firstChild.style.width = `${Math.min(100, (100 * (total - left)) / total)}%`;
    box.replaceChildren(
      el("div", { class: "left", "data-testid": "time-left" }, `${left.toFixed(1)} s left`),
      bar,
      el("div", { class: "meta" }, `${air.comment_id} · ${air.author_name || air.author || "(no name)"} · askers ${air.askers}` + (air.resumed ? " · again after a takeover" : "")),
      el("p", { class: "q" }, air.question || "(question not shown: it did not pass the filters)"),
      el("p", { class: "a" }, air.answer || ""),
      air.slide ? el("img", { src: air.slide.url, alt: air.slide.title || "", "data-testid": "console-slide" }) : null,
    );
  }

  function button(label, testid, onclick, disabled) {
    return el("button", { type: "button", "data-testid": testid, onclick, disabled: !!disabled }, label);
  }

  function renderQueue(queue, hold) {
    $("queue-count").textContent = `(${queue.length})`;
    $("queue").replaceChildren(...queue.map((item) => el("tr", { "data-testid": "queue-item", "data-comment-id": item.comment_id },
      el("td", {}, String(item.rank)),
      el("td", {}, item.comment_id),
      el("td", {}, item.author_name || item.author || "(no name)",
        el("span", { class: "q-text" }, item.question || "(question withheld)"),
        el("span", { class: "says", "data-testid": "queue-speech", title: "what the voice will say, as it will say it" },
          (item.kind === "thanks" ? "thanks: " : "says: ") + (item.speech || ""))),
      el("td", { class: `tier-${item.tier}` }, tierText(item)),
      el("td", {}, String(item.askers)),
      el("td", {}, `${Math.round(item.age_s)} s`),
      el("td", { class: "place", "data-testid": "queue-why", title: scoreText(item.score) }, item.why || ""),
      el("td", { "data-testid": "queue-verdict" }, item.verdict_words || "–"),
      el("td", { "data-testid": "queue-cites" }, citedText(item)),
      el("td", { class: "why" }, item.waits || (item.approved_by ? `approved by ${item.approved_by}` : "")),
      el("td", { class: "actions" },
        button("Air next", "next", () => send("next", item.comment_id)),
        button("Approve", "approve", () => send("approve", item.comment_id), !hold || item.approved_by),
        button("Reject", "reject", () => send("reject", item.comment_id)),
        button("Block viewer", "block", () => send("block", item.author)),
      ),
    )));
  }

  function renderRecent(recent) {
    $("recent").replaceChildren(...recent.slice(0, 20).map((item) => el("tr", { "data-testid": "recent-item" },
      el("td", {}, item.comment_id),
      el("td", { class: `out-${item.outcome}` }, item.outcome),
      el("td", {}, item.reason || ""),
      el("td", {}, item.at ? new Date(item.at).toLocaleTimeString() : ""),
    )));
  }

  function renderHealth(health) {
    const rows = (health && health.stages) || [];
    $("health").replaceChildren(...rows.map((row) => el("tr", { "data-testid": "stage-health" },
      el("td", {}, row.stage),
      el("td", { class: row.processes ? "" : "down" }, String(row.processes)),
      el("td", {}, row.pending == null ? "–" : String(row.pending)),
      el("td", {}, row.in_flight == null ? "–" : String(row.in_flight)),
      el("td", {}, row.pulling == null ? "–" : String(row.pulling)),
    )));
  }

  function render() {
    if (!state) return;
    const status = state.status, mode = status.mode;
    const flags = ["paused", "hold", "ended"].filter((k) => mode[k]);
    $("mode").textContent = flags.length ? flags.join(" · ") : "airing";
    $("mode").className = "mode " + flags.join(" ");
    $("stream").textContent = `stream ${status.stream_id}` + (status.show ? ` · show ${status.show.id}` : "");
    $("speaker").textContent = `speaking: ${state.replica}`;
    $("pause").textContent = mode.paused ? "Resume" : "Pause";
    $("pause").classList.toggle("on", mode.paused);
    $("hold").textContent = `Hold: ${mode.hold ? "on" : "off"}`;
    $("hold").classList.toggle("on", mode.hold);
    renderOnAir(status.on_air);
    renderQueue(status.queue || [], mode.hold);
    renderRecent(status.recent || []);
    renderHealth(state.health);
    const blocked = Object.entries(status.blocked || {});
    $("blocked").textContent = blocked.length ? "blocked: " + blocked.map(([a, by]) => `${a} (by ${by})`).join(", ") : "";
  }

  $("skip").addEventListener("click", () => state && state.status.on_air && send("skip", state.status.on_air.comment_id));
  $("pause").addEventListener("click", () => state && send(state.status.mode.paused ? "resume" : "pause"));
  $("hold").addEventListener("click", () => state && send("hold", state.status.mode.hold ? "off" : "on"));
  $("end").addEventListener("click", () => {
    if (Date.now() > endArmedUntil) { // two clicks within 4 s: ending a stream is not undone by accident
      endArmedUntil = Date.now() + 4000;
      $("end").textContent = "Click again to end";
      setTimeout(() => { $("end").textContent = "End stream"; }, 4000);
      return;
    }
    endArmedUntil = 0;
    $("end").textContent = "End stream";
    send("end");
  });
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, $("token").value.trim());
    $("token").value = "";
    $("token-form").classList.toggle("set", !!token());
    say(token() ? "token kept for this tab" : "token cleared", "ok");
  });
  $("token-form").classList.toggle("set", !!token());
  setInterval(() => state && renderOnAir(state.status.on_air), 200);
  const source = new EventSource("/console/stream");
  source.addEventListener("state", (event) => {
    state = JSON.parse(event.data);
    offsetMs = Date.parse(state.server_time) - Date.now();
    render();
  });
})();
