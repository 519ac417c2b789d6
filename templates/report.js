/* rcdiag report: load plotly.js, draw every chart from the embedded figures, record the outcome,
 * wire copy buttons. plotly.js is either embedded gzip-compressed and base64-encoded in
 * <script id="rcdiag-plotly"> (inflated here with DecompressionStream('gzip') and run), or loaded
 * by a <script src> before this one. window.__rcdiag (installed first in <head>) collects errors;
 * when every chart has settled, the status is written to <script id="rcdiag-status"> and
 * <html data-rcdiag-done="1"> is set. */
(function () {
  "use strict";
  var status = window.__rcdiag;

  function write() {
    try {
      var entries = (window.performance && performance.getEntriesByType)
        ? performance.getEntriesByType("resource") : [];
      status.resources = entries.map(function (e) { return e.name; });
    } catch (err) {
      status.errors.push("status: " + err);
    }
    var copy = {};
    Object.keys(status).forEach(function (k) { if (k !== "flush") { copy[k] = status[k]; } });
    document.getElementById("rcdiag-status").textContent = JSON.stringify(copy);
  }

  function finish() {
    write();
    status.flush = write;  // errors raised later still reach the recorded status
    document.documentElement.setAttribute("data-rcdiag-done", "1");
  }

  function points(data) {
    var n = 0;
    (data || []).forEach(function (trace) {
      var values = trace.y || trace.x || [];
      for (var i = 0; i < values.length; i++) {
        if (values[i] !== null && values[i] !== undefined) { n += 1; }
      }
    });
    return n;
  }

  function inflate(text) {
    var binary = atob(text.replace(/\s+/g, ""));
    var bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i++) { bytes[i] = binary.charCodeAt(i); }
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text();
  }

  function loadPlotly() {
    var blob = document.getElementById("rcdiag-plotly");
    status.plotly = blob ? "embedded" : "script";
    if (window.Plotly) { return Promise.resolve(); }
    if (!blob) {
      return Promise.reject(new Error("plotly.js did not load from its <script src>"));
    }
    if (typeof DecompressionStream === "undefined" || typeof Response === "undefined") {
      return Promise.reject(new Error(
        "this browser cannot inflate the embedded plotly.js (no DecompressionStream): " +
        "open the report in a current browser, or write it with --plotlyjs PATH"));
    }
    return inflate(blob.textContent).then(function (code) {
      var script = document.createElement("script");
      script.textContent = code;
      document.head.appendChild(script);  // runs now, in the page's global scope
      if (!window.Plotly) { throw new Error("the embedded plotly.js did not define Plotly"); }
    });
  }

  function unavailable(err) {
    status.errors.push("plotly.js: " + ((err && err.message) || err));
    document.querySelectorAll("[data-figure]").forEach(function (node) {
      node.classList.add("chart-missing");
      node.textContent = "Chart not drawn: " + ((err && err.message) || err) + ".";
    });
    status.expected = document.querySelectorAll("[data-figure]").length;
  }

  function draw() {
    var figures = JSON.parse(document.getElementById("rcdiag-figures").textContent);
    var nodes = Array.prototype.slice.call(document.querySelectorAll("[data-figure]"));
    var config = {
      displaylogo: false,
      displayModeBar: false,  // the modebar would overlap the legends above the plots
      responsive: true
    };
    status.expected = nodes.length;
    var pending = nodes.map(function (node) {
      var id = node.getAttribute("data-figure");
      var figure = figures[id];
      if (!figure) {
        status.errors.push("no figure data for " + id);
        return Promise.resolve();
      }
      return Plotly.newPlot(node, figure.data, figure.layout, config).then(function () {
        if (node.querySelector(".main-svg") && points(node.data) > 0) {
          status.rendered += 1;
          node.setAttribute("data-rendered", "1");
        } else {
          status.empty.push(id);
        }
      }, function (err) {
        status.errors.push(id + ": " + err);
      });
    });
    return Promise.all(pending);
  }

  function copyText(text, button) {
    function done() {
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = "Copy"; }, 1500);
    }
    function fallback() {
      var area = document.createElement("textarea");
      area.value = text;
      document.body.appendChild(area);
      area.select();
      try { document.execCommand("copy"); done(); } catch (err) { /* nothing to do */ }
      document.body.removeChild(area);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, fallback);
    } else {
      fallback();
    }
  }

  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    button.addEventListener("click", function () {
      var target = document.getElementById(button.getAttribute("data-copy"));
      if (target) { copyText(target.textContent, button); }
    });
  });

  loadPlotly().then(function () {
    return draw().then(finish, function (err) { status.errors.push(String(err)); finish(); });
  }, function (err) {
    unavailable(err);
    finish();
  }).catch(function (err) {
    status.errors.push("draw: " + err);
    finish();
  });
})();
