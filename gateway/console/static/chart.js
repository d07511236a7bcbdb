// Small SVG line charts for the console: time on x, one or more series on y. No library: the console
// must work on a network without internet, with nothing to build.
(function () {
  "use strict";

  const SVG = "http://www.w3.org/2000/svg";
  const COLORS = ["#2454c5", "#d92d20", "#079455", "#b54708"];

  function svgNode(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function shortNumber(v) {
    const a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(1) + "G";
    if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(0) + "k";
    if (a >= 100 || Number.isInteger(v)) return v.toFixed(0);
    return v.toFixed(2);
  }

  function clock(ms) {
    return new Date(ms).toTimeString().slice(0, 8);
  }

  // lineChart(title, series) -> element. series: [{name, points: [[ms, value], ...]}, ...]; the unit goes in the title
  function lineChart(title, series) {
    const W = 560, H = 180, L = 52, R = 10, T = 10, B = 26;
    const box = document.createElement("div");
    box.className = "chart";
    const caption = document.createElement("p");
    caption.className = "title";
    caption.textContent = title;
    box.appendChild(caption);
    const svg = svgNode("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title });
    box.appendChild(svg);
    const all = series.flatMap((s) => s.points);
    if (all.length < 2) {
      svg.appendChild(svgNode("text", { x: W / 2, y: H / 2, "text-anchor": "middle", fill: "#667085", "font-size": 12 },
        "the chart grows while this screen is open (a sample every 5 s)"));
      return box;
    }
    const x0 = Math.min(...all.map((p) => p[0])), x1 = Math.max(...all.map((p) => p[0]));
    let y0 = Math.min(0, ...all.map((p) => p[1])), y1 = Math.max(...all.map((p) => p[1]));
    if (y1 === y0) y1 = y0 + 1;
    const sx = (x) => L + ((x - x0) / Math.max(1, x1 - x0)) * (W - L - R);
    const sy = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
    for (let i = 0; i <= 4; i++) {
      const v = y0 + ((y1 - y0) * i) / 4;
      svg.appendChild(svgNode("line", { x1: L, x2: W - R, y1: sy(v), y2: sy(v), stroke: "#eef1f6" }));
      svg.appendChild(svgNode("text", { x: L - 6, y: sy(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#667085" },
        shortNumber(v)));
    }
    svg.appendChild(svgNode("text", { x: L, y: H - 8, "font-size": 11, fill: "#667085" }, clock(x0)));
    svg.appendChild(svgNode("text", { x: W - R, y: H - 8, "font-size": 11, fill: "#667085", "text-anchor": "end" }, clock(x1)));
    series.forEach((s, i) => {
      if (!s.points.length) return;
      const d = s.points.map((p) => `${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(" ");
      svg.appendChild(svgNode("polyline", { points: d, fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": 2 }));
      const last = s.points[s.points.length - 1];
      svg.appendChild(svgNode("circle", { cx: sx(last[0]), cy: sy(last[1]), r: 3, fill: COLORS[i % COLORS.length] }));
    });
    if (series.length > 1) {
      series.forEach((s, i) => {
        svg.appendChild(svgNode("text", { x: L + 8 + i * 140, y: T + 10, "font-size": 11, fill: COLORS[i % COLORS.length] }, s.name));
      });
    }
    return box;
  }

  // Messages per second between consecutive samples of a published counter ([[ms, count], ...]).
  function ratesOf(samples) {
    const out = [];
    for (let i = 1; i < samples.length; i++) {
      const dt = (samples[i][0] - samples[i - 1][0]) / 1000;
      if (dt > 0) out.push([samples[i][0], Math.max(0, (samples[i][1] - samples[i - 1][1]) / dt)]);
    }
    return out;
  }

  window.tmsChart = { lineChart, ratesOf, shortNumber };
})();
