// An open-loop load generator, run as a worker thread by the benchmarks: POSTs `body` to `url`
// at a steady `rate` per second for `seconds`, however long the answers take (requests that
// find every socket busy wait for one; their latency counts from when they were due, so a
// slow service cannot hide behind a generator that waits for it). Posts back
// {sent, ok, failed, p50, p99, max} in ms.
import http from 'node:http';
import { parentPort, workerData } from 'node:worker_threads';

const { url, body, headers, rate, seconds, sockets = 64 } = workerData;
const agent = new http.Agent({ keepAlive: true, maxSockets: sockets });
const target = new URL(url);
const latencies = [];
let sent = 0;
let ok = 0;
let failed = 0;
let pending = 0;

function fire(due) {
  pending++;
  const req = http.request({ agent, host: target.hostname, port: target.port, path: target.pathname, method: 'POST', headers: { ...headers, 'content-length': Buffer.byteLength(body) } }, (res) => {
    res.resume();
    res.on('end', () => {
      latencies.push(performance.now() - due);
      if (res.statusCode >= 200 && res.statusCode < 300) ok++;
      else failed++;
      pending--;
    });
  });
  req.on('error', () => {
    failed++;
    pending--;
  });
  req.end(body);
}

const start = performance.now();
const end = start + seconds * 1000;
const interval = 1000 / rate;
await new Promise((resolve) => {
  const tick = () => {
    const now = performance.now();
    // every request that has come due since the last tick, each with its own due time
    while (sent < rate * seconds && start + sent * interval <= now) fire(start + sent++ * interval);
    if (now < end) setTimeout(tick, 1);
    else resolve();
  };
  tick();
});
while (pending > 0) await new Promise((r) => setTimeout(r, 5));
agent.destroy();
latencies.sort((a, b) => a - b);
const pick = (p) => Number((latencies[Math.min(latencies.length - 1, Math.ceil(p * latencies.length) - 1)] ?? NaN).toFixed(1));
parentPort.postMessage({ sent, ok, failed, p50: pick(0.5), p99: pick(0.99), max: pick(1) });
