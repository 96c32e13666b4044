// SPDX-License-Identifier: Apache-2.0
// The call tree the flame graph, the top table and the sandwich view work on: the server's flat
// format (format=flat, docs/http-api.md) unpacked into typed arrays in pre-order, with each
// node's x offset (in value units), parent and subtree end computed in one pass. Pre-order with
// a subtree end lets every walk skip a whole subtree in O(1), which is what keeps a million-node
// profile drawable: a frame too narrow to see is skipped with everything under it.

export class FlameData {
  // json: {type, unit, diff, stride, names, nodes}
  constructor(json) {
    const st = json.stride, nodes = json.nodes, n = Math.floor(nodes.length / st);
    this.type = json.type;
    this.unit = json.unit;
    this.diff = !!json.diff;
    this.names = json.names;
    // per node, 1 where the change is not significant at json.confidence (diffs only; absent in
    // trees built here, such as the sandwich's)
    this.noise = this.diff && Array.isArray(json.noise) && json.noise.length === n ? Uint8Array.from(json.noise) : null;
    this.confidence = json.confidence;
    this.n = n;
    this.name = new Uint32Array(n);
    this.depth = new Uint32Array(n);
    this.self = new Float64Array(n);
    this.total = new Float64Array(n);
    if (this.diff) {
      this.bself = new Float64Array(n);
      this.btotal = new Float64Array(n);
    }
    for (let i = 0, o = 0; i < n; i++, o += st) {
      this.name[i] = nodes[o];
      this.depth[i] = nodes[o + 1];
      this.self[i] = nodes[o + 2];
      this.total[i] = nodes[o + 3];
      if (this.diff) {
        this.bself[i] = nodes[o + 4];
        this.btotal[i] = nodes[o + 5];
      }
    }
    this.layout();
  }

  // x: where the node starts, in value units from the root's left edge; a node starts where its
  // parent's next child does (nextX per depth). end: one past the last node of its subtree.
  layout() {
    const n = this.n;
    this.x = new Float64Array(n);
    this.end = new Uint32Array(n);
    this.parent = new Int32Array(n);
    const open = [], nextX = [0];
    let maxDepth = 0;
    for (let i = 0; i < n; i++) {
      const d = this.depth[i];
      while (open.length > d) this.end[open.pop()] = i;
      this.parent[i] = open.length ? open[open.length - 1] : -1;
      const x = nextX[d] || 0;
      this.x[i] = x;
      nextX[d] = x + this.total[i];
      nextX[d + 1] = x;
      open.push(i);
      if (d > maxDepth) maxDepth = d;
    }
    while (open.length) this.end[open.pop()] = n;
    this.maxDepth = maxDepth;
  }

  nodeName(i) { return i === 0 ? this.rootName || 'total' : this.names[this.name[i]]; }

  // "a;b;c" from below the root to i: how a zoom is kept in the URL (node ids change per query).
  path(i) {
    const parts = [];
    for (; i > 0; i = this.parent[i]) parts.push(this.names[this.name[i]]);
    return parts.reverse().join(';');
  }

  findPath(path) {
    if (!path) return 0;
    let node = 0;
    for (const part of path.split(';')) {
      let found = -1;
      for (let c = node + 1; c < this.end[node]; c = this.end[c])
        if (this.names[this.name[c]] === part) { found = c; break; }
      if (found < 0) return -1;
      node = found;
    }
    return node;
  }

  // Per function: self summed, total counted once per stack (a recursive function's inner calls
  // are already in its outer call's total), and the same for the base in a diff.
  top() {
    const nn = this.names.length, self = new Float64Array(nn), total = new Float64Array(nn);
    const bself = this.diff ? new Float64Array(nn) : null, btotal = this.diff ? new Float64Array(nn) : null;
    const onStack = new Int32Array(nn), seen = new Uint8Array(nn), stack = [];
    for (let i = 1; i < this.n; i++) {
      const d = this.depth[i];
      while (stack.length >= d) onStack[stack.pop()]--;
      const nm = this.name[i];
      self[nm] += this.self[i];
      if (this.diff) bself[nm] += this.bself[i];
      if (onStack[nm] === 0) {
        total[nm] += this.total[i];
        if (this.diff) btotal[nm] += this.btotal[i];
      }
      seen[nm] = 1;
      onStack[nm]++;
      stack.push(nm);
    }
    const rows = [];
    for (let k = 0; k < nn; k++) {
      if (!seen[k]) continue;
      const r = {name: this.names[k], self: self[k], total: total[k]};
      if (this.diff) {
        r.bself = bself[k];
        r.btotal = btotal[k];
        r.delta = total[k] - btotal[k];
      }
      rows.push(r);
    }
    return rows;
  }

  // The nodes of function `fname` that have no caller of the same name (outermost calls).
  outermost(fname) {
    const out = [];
    for (let i = 1; i < this.n;) {
      if (this.names[this.name[i]] === fname) {
        out.push(i);
        i = this.end[i];
      } else {
        i++;
      }
    }
    return out;
  }

  // Sandwich view of one function: its callers (a tree rooted at the function, growing towards
  // main) and its callees (every outermost call's subtree merged under one root).
  sandwich(fname) {
    const occ = this.outermost(fname);
    const callers = tnode(fname), callees = tnode(fname);
    for (const i of occ) {
      tadd(callers, this, i);
      let t = callers;
      for (let p = this.parent[i]; p > 0; p = this.parent[p]) {
        t = tchild(t, this.names[this.name[p]]);
        tadd(t, this, i);
      }
      tadd(callees, this, i, true);
      const at = [callees];
      for (let j = i + 1; j < this.end[i]; j++) {
        const rel = this.depth[j] - this.depth[i];
        at.length = rel;
        const c = tchild(at[rel - 1], this.names[this.name[j]]);
        tadd(c, this, j, true);
        at.push(c);
      }
    }
    fixSelf(callers);
    return {callers: FlameData.fromTree(callers, this), callees: FlameData.fromTree(callees, this)};
  }

  // A FlameData from a plain tree {name, self, total, bself, btotal, kids: Map}.
  static fromTree(root, like) {
    const names = [], nameIdx = new Map(), nodes = [];
    const stride = like.diff ? 6 : 4;
    const walk = (t, d) => {
      let k = nameIdx.get(t.name);
      if (k === undefined) { k = names.length; names.push(t.name); nameIdx.set(t.name, k); }
      nodes.push(k, d, t.self, t.total);
      if (like.diff) nodes.push(t.bself, t.btotal);
      const kids = [...t.kids.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name));
      for (const c of kids) walk(c, d + 1);
    };
    walk(root, 0);
    const fd = new FlameData({type: like.type, unit: like.unit, diff: like.diff, stride, names, nodes});
    fd.rootName = root.name;
    return fd;
  }
}

function tnode(name) { return {name, self: 0, total: 0, bself: 0, btotal: 0, kids: new Map()}; }
function tchild(t, name) {
  let c = t.kids.get(name);
  if (!c) { c = tnode(name); t.kids.set(name, c); }
  return c;
}
function tadd(t, fd, i, withSelf) {
  t.total += fd.total[i];
  if (withSelf) t.self += fd.self[i];
  if (fd.diff) {
    t.btotal += fd.btotal[i];
    if (withSelf) t.bself += fd.bself[i];
  }
}
// In a callers tree a node's self is the part of its total not passed on to a caller above.
function fixSelf(t) {
  let s = 0, bs = 0;
  for (const c of t.kids.values()) { fixSelf(c); s += c.total; bs += c.btotal; }
  t.self = t.total - s;
  t.bself = t.btotal - bs;
}
