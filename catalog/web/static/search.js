// Say that a search is running: a large table takes a few seconds to upload and search.
(function () {
  "use strict";
  var form = document.getElementById("search-form");
  var progress = document.getElementById("progress");
  if (!form || !progress) return;
  form.addEventListener("submit", function () {
    progress.hidden = false;
    form.setAttribute("aria-busy", "true");
  });
})();
