// reasonlog dashboard: live pages (docs/dashboard.md, "Live"). A page whose <main> says data-live listens to
// /live (server-sent events); when what it shows changed, it fetches itself again and swaps the parts marked
// data-live-part for the fresh ones. Those come from the server's autoescaped templates, parsed by DOMParser
// (scripts in them never run, and the page's policy forbids inline ones): no recorded text is ever put in HTML
// by this script.
(function () {
  "use strict";
  var main = document.querySelector("main[data-live]");
  if (!main || !window.EventSource || !window.DOMParser) return;
  var kind = main.getAttribute("data-live");
  var mine = main.getAttribute("data-session");
  var badge = document.querySelector(".live-state");
  var last = null, busy = false, again = false, lastRefresh = 0;
  var GAP_MS = kind === "usage" ? 2000 : 200;  // the usage page reads every call: refresh it less often

  function sig(entry) { return entry ? JSON.stringify(entry) : ""; }
  function shownStale(digest) {  // the first digest, against what the page was rendered with
    var e = mine && digest[mine];
    return !!e && (String(e.calls) !== main.getAttribute("data-calls") || e.status !== main.getAttribute("data-status"));
  }
  function changed(before, now) {
    if (mine) return sig(before[mine]) !== sig(now[mine]) && !!now[mine];
    for (var id in now) if (sig(before[id]) !== sig(now[id])) return true;
    return false;
  }
  function selected() {
    var row = document.querySelector("[data-live-part] .current[data-session]");
    return row ? row.getAttribute("data-session") : null;
  }
  function swap(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    var fresh = doc.querySelector("main[data-live]");
    if (!fresh) return;
    var keep = selected();
    document.querySelectorAll("[data-live-part]").forEach(function (part) {
      var name = part.getAttribute("data-live-part");
      var next = doc.querySelector('[data-live-part="' + name + '"]');
      if (next) part.replaceWith(document.importNode(next, true));
    });
    ["data-calls", "data-status"].forEach(function (a) {
      if (fresh.hasAttribute(a)) main.setAttribute(a, fresh.getAttribute(a));
    });
    if (keep) {
      var row = document.querySelector('[data-live-part] tr[data-session="' + CSS.escape(keep) + '"]');
      if (row) row.classList.add("current");
    }
    document.dispatchEvent(new CustomEvent("reasonlog:refreshed"));
  }
  function refresh() {
    if (busy) { again = true; return; }
    var wait = lastRefresh + GAP_MS - Date.now();
    if (wait > 0) { busy = true; setTimeout(function () { busy = false; refresh(); }, wait); return; }
    busy = true;
    lastRefresh = Date.now();
    fetch(window.location.href, {credentials: "same-origin", headers: {"Accept": "text/html"}})
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html) swap(html); })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }
  var source = new EventSource("/live");
  source.addEventListener("open", function () { if (badge) { badge.hidden = false; badge.textContent = "● live"; } });
  source.addEventListener("error", function () { if (badge) badge.textContent = "○ reconnecting"; });
  source.addEventListener("change", function (event) {
    var digest = JSON.parse(event.data).sessions || {};
    if (last === null ? shownStale(digest) : changed(last, digest)) refresh();
    last = digest;
  });
})();
