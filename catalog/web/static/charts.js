// Render every server-built Vega-Lite spec of the page with the vendored vega-embed (SVG, no actions menu).
(function () {
  "use strict";
  document.querySelectorAll("[data-vega-spec]").forEach(function (el) {
    var source = document.getElementById(el.getAttribute("data-vega-spec"));
    if (!source || typeof vegaEmbed !== "function") return;
    vegaEmbed(el, JSON.parse(source.textContent), { renderer: "svg", actions: false }).catch(function (err) {
      el.textContent = "chart unavailable: " + err;
    });
  });
})();
