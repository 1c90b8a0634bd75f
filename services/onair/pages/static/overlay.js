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

  // An answer is said sentence by sentence: one clip each, with its place on the server's clock (offset_ms after
  // started_at). Each clip is fetched the moment the server announces it and kept in memory, so when the one before
  // ends the next starts at once (back to back), and the page can start (or seek) a clip at the second the server's
  // clock says: a reload mid-answer resumes mid-sentence, not from the start.
  const blobs = new Map(); // clip URL -> object URL, for the airing on air
  let playing = null; // the clip in the audio element
  let due = null; // a timer for a clip whose moment has not come

  function clipsOf(air) {
    if (air.sentences && air.sentences.length) return air.sentences.filter((c) => c.audio_url);
    return air.audio_url ? [{ n: 1, offset_ms: 0, audio_ms: air.audio_ms || 0, audio_url: air.audio_url }] : [];
  }

  function fetchClips(air) {
    for (const clip of clipsOf(air)) {
      if (blobs.has(clip.audio_url)) continue;
      blobs.set(clip.audio_url, null);
      fetch(clip.audio_url)
        .then((reply) => (reply.ok ? reply.blob() : null))
        .then((blob) => {
          if (!blob || current !== air) return;
          blobs.set(clip.audio_url, URL.createObjectURL(blob));
          schedule();
        })
        .catch(() => blobs.delete(clip.audio_url));
    }
  }

  // Which clip plays now: the one under the server's clock, or the next one once the one playing has ended.
  function schedule() {
    if (!current || current.leaving) return;
    const busy = playing && audio.src && !audio.paused && !audio.ended;
    if (busy) return;
    const pos = elapsedMs(current);
    const after = playing ? playing.n : 0;
    const next = clipsOf(current).find((c) => c.n > after && pos < c.offset_ms + c.audio_ms);
    if (!next) return;
    const blob = blobs.get(next.audio_url);
    if (!blob) return; // fetched soon: schedule() runs again then
    const early = next.offset_ms - pos;
    // The one before it just played to its end: this one follows at once (the page's clock and the audio's
    // differ by a few tens of ms; resync() keeps them together).
    const followsOn = playing && audio.ended && next.n === playing.n + 1 && early < 300;
    if (early > 40 && !followsOn) {
      clearTimeout(due);
      due = setTimeout(schedule, early);
      return;
    }
    playing = next;
    audio.src = blob;
    // Back to back (its predecessor just ended): from its start. Joined late (a reload): where the server is.
    const at = -early / 1000;
    if (at > 0.25) audio.currentTime = at;
    audio.play().then(() => { unmute.hidden = true; }).catch(() => { unmute.hidden = false; }); // OBS needs no click
  }

  function play(air) {
    fetchClips(air);
    schedule();
  }

  function stop() {
    clearTimeout(due);
    audio.pause();
    audio.removeAttribute("src");
    audio.load();
    for (const url of blobs.values()) if (url) URL.revokeObjectURL(url);
    blobs.clear();
    playing = null;
  }

  function show(air) {
    if (current) stop();
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
    play(air);
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
    const sounding = playing && audio.src && !audio.paused && !audio.ended;
    const pos = sounding ? playing.offset_ms + audio.currentTime * 1000 : elapsedMs(current);
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
    const sounding = current && playing && audio.src && !audio.paused && !audio.ended;
    const clips = current ? clipsOf(current) : [];
    const lastClip = sounding && clips.length && playing.n === clips[clips.length - 1].n;
    if (finished && lastClip && audio.duration - audio.currentTime < 2) {
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
    if (!current || current.leaving || !playing || !audio.src || audio.paused || audio.ended) return;
    const want = (elapsedMs(current) - playing.offset_ms) / 1000;
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
      current = Object.assign(current, {
        cues: air.cues, slide: air.slide, ends_at: air.ends_at, sentences: air.sentences, audio_ms: air.audio_ms,
      });
      fetchClips(current);
      schedule();
    }
    const preparing = !air && state.preparing;
    $("preparing").hidden = !preparing;
    $("preparing-text").textContent = words(lang).preparing;
  }

  unmute.addEventListener("click", () => { if (playing) audio.play().catch(() => {}); else schedule(); });
  // The next sentence, at once: in the next task, so whoever else listens to this clip's end sees this clip.
  audio.addEventListener("ended", () => setTimeout(schedule, 0));
  setInterval(tick, 100);
  setInterval(schedule, 250);
  setInterval(resync, 1000);
  const source = new EventSource("/overlay/stream");
  source.addEventListener("state", (event) => apply(JSON.parse(event.data)));
  window.kotaeOverlay = { current: () => current, cue: () => shownCue, clip: () => playing, offsetMs: () => offsetMs };
})();
