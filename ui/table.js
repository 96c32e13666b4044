// SPDX-License-Identifier: Apache-2.0
// The top table beside the flame graph: one row per function with self and total (a recursive
// function counted once per stack), or in a diff baseline, comparison and change, ranked by the
// change. Sortable by any column, filtered by a substring; a click on a row picks the function
// (the page focuses it in the graph and the sandwich view). At most ROWS rows are put in the DOM.

import {fmtValue, pct, esc, unchanged} from './flame.js';

const ROWS = 200;

export class TopTable {
  constructor(table, counter, opts = {}) {
    this.table = table;
    this.counter = counter;
    this.onPick = opts.onPick || (() => {});
    this.onSort = opts.onSort || (() => {});
    this.rows = [];
    this.filter = '';
    this.picked = '';
    table.tHead.addEventListener('click', (e) => {
      const th = e.target.closest('th');
      if (!th || !th.dataset.key) return;
      this.sortKey = th.dataset.key;
      this.onSort(this.sortKey);
      this.render();
    });
    table.tBodies[0].addEventListener('click', (e) => {
      const tr = e.target.closest('tr');
      if (!tr || tr.dataset.i === undefined) return;
      this.picked = this.visible[+tr.dataset.i].name;
      this.onPick(this.picked);
      this.render();
    });
  }

  setData(data, sortKey, filter) {
    this.data = data;
    if (filter !== undefined) this.filter = filter;
    this.rows = data ? data.top() : [];
    this.sortKey = sortKey || (data && data.diff ? 'delta' : 'self');
    this.render();
  }

  setFilter(f) { this.filter = f || ''; this.render(); }

  columns() {
    if (this.data && this.data.diff)
      return [['name', 'Function'], ['btotal', 'Base'], ['total', 'New'], ['delta', 'Change'],
        ['self', 'Self']];
    return [['name', 'Function'], ['self', 'Self'], ['selfp', 'Self %'], ['total', 'Total'], ['totalp', 'Total %']];
  }

  render() {
    const d = this.data, cols = this.columns();
    const key = this.sortKey.replace(/p$/, '');
    this.table.tHead.innerHTML = '<tr>' + cols.map(([k, t]) =>
      `<th data-key="${k}"${k === this.sortKey ? ' class="sorted"' : ''}>${t}</th>`).join('') + '</tr>';
    const f = this.filter.toLowerCase();
    let rows = f ? this.rows.filter((r) => r.name.toLowerCase().includes(f)) : this.rows.slice();
    if (key === 'name') rows.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name));
    else if (key === 'delta') rows.sort((a, b) => Math.abs(b.delta) - Math.abs(a.delta) || (a.name < b.name ? -1 : 1));
    else rows.sort((a, b) => b[key] - a[key] || (a.name < b.name ? -1 : 1));
    this.sorted = rows;
    this.visible = rows.slice(0, ROWS);
    const u = d ? d.unit : '', all = d ? d.total[0] : 0;
    this.table.tBodies[0].innerHTML = this.visible.map((r, i) => {
      const on = r.name === this.picked ? ' class="on"' : '';
      if (d.diff) {
        // a change below what the cell can show is no change: no sign, no colour
        const same = unchanged(r.total, r.btotal);
        const cls = same ? '' : r.delta > 0 ? 'grew' : r.delta < 0 ? 'shrank' : '';
        const rel = r.btotal ? ` (${r.delta >= 0 ? '+' : ''}${(100 * r.delta / r.btotal).toFixed(1)}%)` : r.delta ? ' (new)' : '';
        const change = same ? 'unchanged' : `${r.delta >= 0 ? '+' : ''}${fmtValue(r.delta, u)}${rel}`;
        return `<tr data-i="${i}"${on}><td title="${esc(r.name)}">${esc(r.name)}</td><td>${fmtValue(r.btotal, u)}</td>` +
          `<td>${fmtValue(r.total, u)}</td><td class="${cls}">${change}</td>` +
          `<td>${fmtValue(r.self, u)}</td></tr>`;
      }
      return `<tr data-i="${i}"${on}><td title="${esc(r.name)}">${esc(r.name)}</td><td>${fmtValue(r.self, u)}</td>` +
        `<td>${pct(r.self, all)}</td><td>${fmtValue(r.total, u)}</td><td>${pct(r.total, all)}</td></tr>`;
    }).join('');
    this.counter.textContent = rows.length > ROWS ? `${ROWS} of ${rows.length} functions` : `${rows.length} functions`;
  }
}
