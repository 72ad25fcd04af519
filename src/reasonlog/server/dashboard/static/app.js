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
})();
