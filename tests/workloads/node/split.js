// SPDX-License-Identifier: Apache-2.0
// A Node.js workload with a known CPU split for native sampling through V8's perf map
// (tests/e2e/agent_jit.sh): alpha and beta burn CPU 2:1 (alpha runs twice for each beta), each
// run as its own task from the event loop, so no JavaScript caller can inline them and hide
// them from a perf map (which has no inlined frames). Each measures the CPU it got
// (process.cpuUsage around its work: the main thread's, as nothing else runs meanwhile).
// Usage: node --perf-basic-prof split.js SECONDS TRUTHFILE -> writes "pid N",
// "process_cpu_ns N" (the two functions' sum), "alpha NS" and "beta NS" when done.
'use strict';
const fs = require('fs');
const secs = Number(process.argv[2] || 10);
const out = process.argv[3] || '/dev/stdout';
const end = Date.now() + secs * 1000;
const cpu = { alpha: 0, beta: 0 };
let sink = 1;

function usedNs(c0) {
  const d = process.cpuUsage(c0);
  return (d.user + d.system) * 1000;
}

function alpha() {
  const c0 = process.cpuUsage();
  let x = sink;
  for (let i = 0; i < 3000000; i++) x = (Math.imul(x, 1103515245) + 12345) | 0;
  sink = x;
  cpu.alpha += usedNs(c0);
  next();
}

function beta() {
  const c0 = process.cpuUsage();
  let x = sink;
  for (let i = 0; i < 3000000; i++) x = (Math.imul(x, 1103515245) + 12345) | 0;
  sink = x;
  cpu.beta += usedNs(c0);
  next();
}

const order = [alpha, alpha, beta];
let turn = 0;
function next() {
  if (Date.now() >= end) {
    fs.writeFileSync(out, `pid ${process.pid}\nprocess_cpu_ns ${cpu.alpha + cpu.beta}\n` +
      `alpha ${cpu.alpha}\nbeta ${cpu.beta}\n`);
    return;
  }
  setImmediate(order[turn++ % order.length]);
}
next();
