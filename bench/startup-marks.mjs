// Preload for bench/startup-pair.ts (`node --import ./bench/startup-marks.mjs …`): marks, in ms
// since process start, each HTTPS request of the agent (sent, socket connecting, TLS up, response,
// body end), each child process spawned, each fs.watch and each log line, and writes them at exit
// to the file named by LVP_STARTUP_MARKS. It changes no behaviour: every wrapper calls the
// original.
import childProcess from 'node:child_process';
import fs, { writeFileSync } from 'node:fs';
import https from 'node:https';
import { syncBuiltinESMExports } from 'node:module';
import { performance } from 'node:perf_hooks';

const out = process.env['LVP_STARTUP_MARKS'];
/** @type {[number, string][]} */
const marks = [[performance.now(), 'preload']];
/** @param {string} what */
const mark = (what) => {
  marks.push([performance.now(), what]);
};

const request = https.request;
/** @type {typeof https.request} */
// @ts-expect-error -- one wrapper for all of request's overloads
https.request = function markedRequest(...args) {
  const options = args.find((a) => typeof a === 'object' && !(a instanceof URL));
  const target = typeof args[0] === 'string' || args[0] instanceof URL ? String(args[0]) : '';
  const path = options !== undefined && 'path' in options ? String(options.path) : target;
  const method = options !== undefined && 'method' in options ? String(options.method) : 'GET';
  const what = `${method} ${path.split('&')[0]?.slice(0, 60) ?? ''}`;
  mark(`request ${what}`);
  // @ts-expect-error -- passed through as given
  const req = request.apply(this, args);
  req.once('socket', (socket) => {
    if (!socket.connecting) return;
    mark(`  connecting ${what}`);
    socket.once('secureConnect', () => mark(`  TLS up ${what}`));
  });
  req.once('response', (res) => {
    mark(`  response ${what}`);
    res.once('end', () => mark(`  end ${what}`));
  });
  return req;
};
const spawn = childProcess.spawn;
// @ts-expect-error -- one wrapper for all of spawn's overloads
childProcess.spawn = function markedSpawn(...args) {
  mark(`spawn ${String(args[0])}`);
  // @ts-expect-error -- passed through as given
  const child = spawn.apply(this, args);
  mark('  spawned');
  return child;
};
const watch = fs.watch;
// @ts-expect-error -- one wrapper for all of watch's overloads
fs.watch = function markedWatch(...args) {
  mark(`fs.watch ${String(args[0])}`);
  // @ts-expect-error -- passed through as given
  return watch.apply(this, args);
};
syncBuiltinESMExports();
const write = process.stderr.write.bind(process.stderr);
/** @param {string | Uint8Array} chunk @param {...unknown} rest */
process.stderr.write = (chunk, ...rest) => {
  const msg = /"msg":"([^"]*)"/u.exec(String(chunk))?.[1];
  if (msg !== undefined) mark(`log ${msg}`);
  // @ts-expect-error -- passed through as given
  return write(chunk, ...rest);
};
process.on('exit', () => {
  if (out !== undefined) writeFileSync(out, JSON.stringify(marks));
});
