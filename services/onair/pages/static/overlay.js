// kotae overlay: follows the on-air stage's state (Server-Sent Events from /overlay/stream) and its clock.
// The server decides what is on air and when it ends; this page only shows it and plays its audio, so a
// reload or a reconnect mid-answer resumes at the same answer, the same sentence and the same second.
"use strict";
(function () {
  const params = new URLSearchParams(location.search);
  if (params.get("layout") === "subtitles") document.body.classList.add("layout-subtitles");
  const $ = (id) => document.getElementById(id);
  const stage = $("stage"), audio = $("voice"), subtitle = $("answer"), unmute = $("unmute");
  const TEXT = {
    ja: { credit: (n) => `ほか${n}人から同じ質問`, preparing: "回答を準備中…", slide: (n) => `スライド ${n}` },
    en: { credit: (n) => `+${n} ${n === 1 ? "other" : "others"} asked the same`, preparing: "Preparing an answer…", slide: (n) => `Slide ${n}` },
  };
  let offsetMs = 0; // the server's clock minus this page's
  let current = null; // what is on air, as the server last said
  let shownCue = -1;
  let lang = "ja";

  const serverNow = () => Date.now() + offsetMs;
  const words = (l) => TEXT[l] || TEXT.ja;

  // Text with [N] citation markers as small badges; viewers' text only ever goes in as text nodes.
  function setCited(el, text) {
    el.replaceChildren();
    const parts = String(text || "").split(/(\[\s*\d+(?:\s*[-,、]\s*\d+)*\s*\])/);
    for (const part of parts) {
      const m = part.match(/^\[\s*(.+?)\s*\]$/);
      if (m) {
        const sup = document.createElement("sup");
        sup.className = "cite";
        sup.textContent = m[1];
        el.appendChild(sup);
      } else if (part) {
        el.appendChild(document.createTextNode(part));
      }
    }
  }

  function elapsedMs(air) {
    return serverNow() - Date.parse(air.started_at);
  }

  // The audio is fetched whole and played from memory, so the page can start it (or seek it) at the second the
  // server's clock says: a reload mid-answer resumes mid-sentence, not from the start.
  let audioUrl = null;
  async function play(air) {
    unmute.hidden = true;
    if (!air.audio_url) return;
    if (air.audio_ms && elapsedMs(air) >= air.audio_ms) return; // its audio has already played out
    if (!air.blob) {
      const reply = await fetch(air.audio_url);
      if (!reply.ok || current !== air) return;
      air.blob = URL.createObjectURL(await reply.blob());
    }
    if (current !== air) { URL.revokeObjectURL(air.blob); return; }
    if (audioUrl && audioUrl !== air.blob) URL.revokeObjectURL(audioUrl);
    audioUrl = air.blob;
    audio.src = air.blob;
    const at = Math.max(0, elapsedMs(air) / 1000);
    if (at > 0.05) audio.currentTime = at;
    try {
      await audio.play();
    } catch (err) {
      unmute.hidden = false; // a browser that wants a click first (OBS does not)
    }
  }

  function stop() {
    audio.pause();
    audio.removeAttribute("src");
    audio.load();
    if (audioUrl) URL.revokeObjectURL(audioUrl);
    audioUrl = null;
  }

  function show(air) {
    current = air;
    shownCue = -1;
    lang = air.lang || "ja";
    const w = words(lang);
    $("asker").textContent = air.asker || "";
    const paid = air.superchat;
    $("paid").hidden = !paid;
    $("paid").textContent = paid ? `${paid.amount} ${paid.currency}` : "";
    $("question").textContent = air.question || "";
    $("credit").hidden = !(air.others > 0);
    $("credit").textContent = air.others > 0 ? w.credit(air.others) : "";
    $("ask").hidden = !air.question && !air.asker;
    const slide = air.slide;
    $("slide-frame").hidden = !slide;
    if (slide) {
      if ($("slide").getAttribute("src") !== slide.url) $("slide").src = slide.url;
      $("slide").alt = slide.title || "";
      $("slide-caption").textContent = [slide.number != null ? w.slide(slide.number) : "", slide.title || ""].filter(Boolean).join(" · ");
    }
    stage.classList.add("airing");
    stage.classList.remove("idle");
    stage.dataset.commentId = air.comment_id;
    play(air).catch(() => { unmute.hidden = false; });
    tick();
  }

  function clear() {
    current = null;
    shownCue = -1;
    stop();
    stage.classList.remove("airing");
    stage.classList.add("idle");
    delete stage.dataset.commentId;
    subtitle.replaceChildren();
    $("ask").classList.remove("reading");
  }

  // Which sentence is being said: the audio's own position while it plays, else the server's clock.
  function tick() {
    if (!current) return;
    const cues = current.cues || [];
    if (!cues.length) return;
    const playing = current.audio_url && audio.src && !audio.paused && !audio.ended;
    const pos = playing ? audio.currentTime * 1000 : elapsedMs(current);
    let index = cues.findIndex((c) => pos >= c.start_ms && pos < c.end_ms);
    if (index < 0) index = pos < cues[0].start_ms ? 0 : cues.length - 1;
    if (index === shownCue) return;
    shownCue = index;
    const cue = cues[index];
    $("ask").classList.toggle("reading", cue.part === "question");
    if (cue.part === "question") subtitle.replaceChildren();
    else setCited(subtitle, cue.text);
    subtitle.dataset.cue = String(index);
  }

  // Off air by the server's clock. A finished answer's audio may still have a moment to play (it started a
  // little after the server's clock said, while it loaded): let it end. Anything else is cut at once.
  function offAir(last) {
    const finished = last && current && last.key === current.key && last.outcome === "finished";
    const playing = current && current.audio_url && audio.src && !audio.paused && !audio.ended;
    if (finished && playing && audio.duration - audio.currentTime < 2) {
      if (!current.leaving) {
        current.leaving = true;
        const done = () => { if (current && current.leaving) clear(); };
        audio.addEventListener("ended", done, { once: true });
        setTimeout(done, 2500);
      }
      return;
    }
    clear();
  }

  // Keep the audio on the server's clock: a page that fell behind (a slow load, a stall) catches up.
  function resync() {
    if (!current || current.leaving || !current.audio_url || !audio.src || audio.paused || audio.ended) return;
    const want = elapsedMs(current) / 1000;
    if (want < audio.duration && Math.abs(audio.currentTime - want) > 0.75) audio.currentTime = want;
  }

  function apply(state) {
    offsetMs = Date.parse(state.server_time) - Date.now();
    const air = state.on_air;
    if (!air) {
      if (current) offAir(state.last);
    } else if (!current || current.key !== air.key) {
      show(air);
    } else {
      current = Object.assign(current, { cues: air.cues, slide: air.slide, ends_at: air.ends_at });
    }
    const preparing = !air && state.preparing;
    $("preparing").hidden = !preparing;
    $("preparing-text").textContent = words(lang).preparing;
  }

  unmute.addEventListener("click", () => { if (current) play(current).catch(() => {}); });
  setInterval(tick, 100);
  setInterval(resync, 1000);
  const source = new EventSource("/overlay/stream");
  source.addEventListener("state", (event) => apply(JSON.parse(event.data)));
  window.kotaeOverlay = { current: () => current, cue: () => shownCue, offsetMs: () => offsetMs };
})();
