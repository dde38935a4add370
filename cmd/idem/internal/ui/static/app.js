// idem ui: the only script, served from the binary (the CSP allows no
// other, and no inline script). The pages work without it. It hides the
// response fields when "released" is chosen, selects every unknown record
// of a page at once, refreshes list pages while nobody is editing a form,
// and moves through a list with the keyboard: j/k (or ↓/↑) go to the next
// or previous record, Enter opens it, x selects it, / goes to the search.
(function () {
  "use strict";

  // Decision forms: the response fields mean nothing for "released".
  function responseToggle(formId, releasedId) {
    var form = document.getElementById(formId);
    if (!form) { return; }
    var fields = form.querySelector(".response-fields");
    if (!fields) { return; }
    function update() {
      var released = document.getElementById(releasedId);
      fields.classList.toggle("hidden", !!(released && released.checked));
    }
    form.addEventListener("change", update);
    update();
  }
  responseToggle("resolve-form", "as-released");
  responseToggle("bulk-form", "bulk-as-released");

  // "Select all on this page".
  var all = document.getElementById("select-all");
  var rows = Array.prototype.slice.call(document.querySelectorAll("input.sel-row"));
  if (all) {
    all.addEventListener("change", function () {
      rows.forEach(function (c) { c.checked = all.checked; });
    });
    rows.forEach(function (c) {
      c.addEventListener("change", function () {
        all.checked = rows.length > 0 && rows.every(function (x) { return x.checked; });
      });
    });
  }

  // Auto-refresh: list pages reload every 15 s while the box is ticked, the
  // tab is visible, and no form is being edited (a field has the focus, a
  // record is selected, or something was typed). Unticking it lasts for
  // the browser session.
  var auto = document.getElementById("autorefresh");
  var edited = false;
  document.addEventListener("input", function () { edited = true; });
  function editing() {
    var a = document.activeElement;
    if (edited || rows.some(function (c) { return c.checked; })) { return true; }
    return !!(a && a.form && a.id !== "autorefresh");
  }
  if (auto) {
    auto.closest(".autorefresh").classList.remove("hidden");
    auto.checked = sessionStorage.getItem("idem-ui-autorefresh") !== "off";
    auto.addEventListener("change", function () {
      sessionStorage.setItem("idem-ui-autorefresh", auto.checked ? "on" : "off");
    });
    var every = parseInt(auto.getAttribute("data-every"), 10) || 15000;
    window.setInterval(function () {
      var status = document.getElementById("autorefresh-status");
      if (!auto.checked || document.visibilityState !== "visible") { return; }
      if (editing()) {
        if (status) { status.textContent = "paused while you edit"; }
        return;
      }
      window.location.reload();
    }, every);
  }

  // Keyboard: j/k through the rows, x selects, / searches.
  var links = Array.prototype.slice.call(document.querySelectorAll("tr.row a.key"));
  function typing(e) {
    var t = e.target;
    return t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);
  }
  function move(by) {
    if (links.length === 0) { return; }
    var i = links.indexOf(document.activeElement);
    i = i < 0 ? (by > 0 ? 0 : links.length - 1) : Math.max(0, Math.min(links.length - 1, i + by));
    links[i].focus();
  }
  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey || typing(e)) { return; }
    switch (e.key) {
    case "j": case "ArrowDown":
      if (links.length) { move(1); e.preventDefault(); }
      break;
    case "k": case "ArrowUp":
      if (links.length) { move(-1); e.preventDefault(); }
      break;
    case "x":
      var i = links.indexOf(document.activeElement);
      if (i >= 0) {
        var c = links[i].closest("tr").querySelector("input.sel-row");
        if (c) { c.checked = !c.checked; c.dispatchEvent(new Event("change")); }
        e.preventDefault();
      }
      break;
    case "/":
      var q = document.getElementById("q-key") || document.querySelector("form.filters input");
      if (q) { q.focus(); e.preventDefault(); }
      break;
    }
  });
})();
