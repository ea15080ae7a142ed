// Starts `laya serve -m MODEL --port 0` (2 threads, no idle spinning) for the
// e2e tests; resolves `url` with its base URL once it says it listens.
import { spawn } from 'node:child_process';

export function startServer(laya, model, args) {
  const child = spawn(laya, ['serve', '-m', model, '--port', '0', '-t', '2', '--awake-ms', '0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  const url = new Promise((resolve, reject) => {
    child.stderr.on('data', (d) => {
      err += d.toString();
      const m = err.match(/listening on (http:\/\/[0-9.:]+)/);
      if (m) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`laya serve exited with ${code}: ${err}`)));
    setTimeout(() => reject(new Error(`laya serve did not start in 60 s: ${err}`)), 60000);
  });
  return { child, url };
}
