// Perfetto's trace processor (the WebAssembly build the Perfetto UI runs) as a byte pipe:
// stdin: requests, each a 4-byte little-endian length then a TraceProcessorRpcStream;
// stdout: the engine's replies as it writes them (TraceProcessorRpcStream framing).
"use strict";
const fs = require("fs");
const path = require("path");
const vm = require("vm");
const { MessageChannel } = require("worker_threads");
const dir = process.argv[2];
globalThis.self = globalThis;
process.type = "renderer";  // the bundle is built for the web: do not take the node path
globalThis.WorkerGlobalScope = function WorkerGlobalScope() {};
globalThis.location = { href: "http://localhost/", protocol: "http:", host: "localhost" };
globalThis.fetch = async (url) => {
  const data = fs.readFileSync(path.join(dir, String(url).split("/").pop()));
  return new Response(data, { headers: { "Content-Type": "application/wasm" } });
};
globalThis.XMLHttpRequest = class {
  open(method, url) { this.url = String(url); }
  send() {
    const data = fs.readFileSync(path.join(dir, this.url.split("/").pop()));
    this.response = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
    this.status = 200;
  }
};
console.log = (...a) => process.stderr.write(a.join(" ") + "\n");
console.warn = console.log;
vm.runInThisContext(fs.readFileSync(path.join(dir, "engine_bundle.js"), "utf8"));
const ch = new MessageChannel();
self.onmessage({ data: ch.port1 });
ch.port2.on("message", (data) => { process.stdout.write(Buffer.from(data)); });
let buf = Buffer.alloc(0);
process.stdin.on("data", (chunk) => {
  buf = Buffer.concat([buf, chunk]);
  while (buf.length >= 4) {
    const n = buf.readUInt32LE(0);
    if (buf.length < 4 + n) break;
    const msg = new Uint8Array(buf.subarray(4, 4 + n));
    buf = buf.subarray(4 + n);
    ch.port2.postMessage(msg);
  }
});
process.stdin.on("end", () => { setTimeout(() => process.exit(0), 100); });
