// idem ui: the only script, served from the binary. The pages work
// without it; it hides the response fields when "released" is chosen.
(function () {
  "use strict";
  var form = document.getElementById("resolve-form");
  if (!form) { return; }
  var fields = document.getElementById("response-fields");
  function update() {
    var released = document.getElementById("as-released");
    fields.classList.toggle("hidden", !!(released && released.checked));
  }
  form.addEventListener("change", update);
  update();
})();
