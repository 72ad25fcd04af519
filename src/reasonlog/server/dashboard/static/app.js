// reasonlog dashboard: copy buttons and the theme switch. No recorded text is ever passed to innerHTML.
(function () {
  "use strict";
  var root = document.documentElement;
  var saved = window.localStorage && localStorage.getItem("reasonlog-theme");
  if (saved) root.setAttribute("data-theme", saved);
  document.addEventListener("click", function (event) {
    var target = event.target;
    if (!(target instanceof Element)) return;
    var copy = target.closest("[data-copy]");
    if (copy) {
      var source = document.getElementById(copy.getAttribute("data-copy"));
      if (source && navigator.clipboard) {
        navigator.clipboard.writeText(source.textContent).then(function () { copy.textContent = "Copied"; });
      }
    }
    if (target.closest("[data-theme-toggle]")) {
      var dark = root.getAttribute("data-theme") === "dark" ||
        (!root.getAttribute("data-theme") && window.matchMedia("(prefers-color-scheme: dark)").matches);
      var next = dark ? "light" : "dark";
      root.setAttribute("data-theme", next);
      if (window.localStorage) localStorage.setItem("reasonlog-theme", next);
    }
  });

  // Keys (shown at the foot of every page): j / k the next / previous session in a list or call in a session,
  // Enter opens the chosen session, [ / ] the previous / next session of the list you came from, / search,
  // t a session's timeline, u the usage page, ? the keys; in the review queue p / f / a / n (below). Never while
  // typing in a field.
  var LIST = "reasonlog-list";
  function items() {
    if (document.querySelector("table.sessions")) return document.querySelectorAll("table.sessions tbody tr:not(.hits)");
    return document.querySelectorAll("ol.timeline > li.call");
  }
  function current() {
    var all = items();
    for (var i = 0; i < all.length; i++) if (all[i].classList.contains("current")) return i;
    return -1;
  }
  function choose(i) {
    var all = items();
    if (!all.length) return;
    i = Math.max(0, Math.min(all.length - 1, i));
    for (var n = 0; n < all.length; n++) all[n].classList.remove("current");
    all[i].classList.add("current");
    all[i].scrollIntoView({block: "center"});
    var link = all[i].querySelector("a");
    if (link) link.focus({preventScroll: true});
    chooseForReview(all[i], i);
  }
  // The review queue (/review): the form reviews the chosen row; p / f give a verdict, a writes a note, n skips.
  function reviewForm() { return document.querySelector("form.review"); }
  function chooseForReview(row, i) {
    var form = reviewForm();
    var link = row.querySelector("td.title a");
    if (!form || !link) return;
    form.elements.session.value = row.getAttribute("data-session");
    form.elements.at.value = String(i);
    var shown = form.querySelector("a.chosen");
    shown.textContent = link.textContent;
    shown.setAttribute("href", link.getAttribute("href"));
  }
  function verdict(value) {
    var form = reviewForm();
    var button = form && form.querySelector("button[value=" + value + "]");
    if (button) form.requestSubmit(button);
  }
  function rememberList() {
    var links = document.querySelectorAll("table.sessions tbody td.title a");
    if (!links.length || !window.sessionStorage) return;
    var paths = [];
    for (var i = 0; i < links.length; i++) paths.push(links[i].getAttribute("href"));
    sessionStorage.setItem(LIST, JSON.stringify(paths));
  }
  function sibling(step) {
    var paths = JSON.parse((window.sessionStorage && sessionStorage.getItem(LIST)) || "[]");
    var here = window.location.pathname.replace(/\/timeline$/, "");
    var at = paths.indexOf(here);
    if (at >= 0 && paths[at + step]) window.location.assign(paths[at + step]);
  }
  function search() {
    var box = document.querySelector("input[name=q]");
    if (box) { box.focus(); box.select(); } else window.location.assign("/#search");
  }
  rememberList();
  if (window.location.hash === "#search") search();
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && target instanceof Element &&
        target.closest("form.review")) {
      event.preventDefault();
      reviewForm().requestSubmit(reviewForm().querySelector("button.save"));
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (target instanceof Element && target.closest("input, textarea, select, [contenteditable]")) {
      if (event.key === "Escape") target.blur();
      return;
    }
    var help = document.getElementById("keys-help");
    var key = event.key;
    if (key === "j") choose(current() + 1);
    else if (key === "k") choose(current() < 0 ? 0 : current() - 1);
    else if (key === "Enter" && current() >= 0) {
      var link = items()[current()].querySelector("a");
      if (!link) return;
      window.location.assign(link.getAttribute("href"));
    }
    else if (key === "]") sibling(1);
    else if (key === "[") sibling(-1);
    else if (key === "/") search();
    else if (key === "t") {
      var timeline = document.querySelector("a.timeline-link");
      if (!timeline) return;
      window.location.assign(timeline.getAttribute("href"));
    }
    else if (key === "u") window.location.assign("/usage");
    else if (key === "p" && reviewForm()) verdict("pass");
    else if (key === "f" && reviewForm()) verdict("fail");
    else if (key === "n" && reviewForm()) choose(current() + 1);
    else if (key === "a" && reviewForm()) reviewForm().elements.note.focus();
    else if (key === "?" && help) help.open = !help.open;
    else return;
    event.preventDefault();
  });
})();
