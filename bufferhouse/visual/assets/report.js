(function () {
  "use strict";
  function key(cell) {
    var v = cell.getAttribute("data-v");
    if (v !== null && v !== "") { return {kind: 0, value: parseFloat(v)}; }
    var t = cell.textContent.trim();
    if (t === "" || t === "\u2014") { return {kind: 2, value: ""}; }
    return {kind: 1, value: t.toLowerCase()};
  }
  function compare(a, b) {
    if (a.kind !== b.kind) { return a.kind - b.kind; }
    if (a.kind === 0) { return a.value - b.value; }
    return a.value < b.value ? -1 : a.value > b.value ? 1 : 0;
  }
  function sortBy(table, th, col) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var numeric = th.classList.contains("n");
    var current = th.getAttribute("aria-sort");
    var ascending = current ? current === "descending" : !numeric;
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) {
      h.removeAttribute("aria-sort");
    });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var keyed = rows.map(function (row, i) { return [key(row.cells[col]), i, row]; });
    keyed.sort(function (x, y) {
      var empty = (x[0].kind === 2) - (y[0].kind === 2);
      if (empty !== 0) { return empty; }
      var c = compare(x[0], y[0]);
      return (ascending ? c : -c) || x[1] - y[1];
    });
    keyed.forEach(function (k) { body.appendChild(k[2]); });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.tabIndex = 0;
      th.addEventListener("click", function () { sortBy(table, th, col); });
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(table, th, col); }
      });
    });
  });
})();
