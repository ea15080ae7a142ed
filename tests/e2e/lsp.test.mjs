// End to end: `laya lsp` driven by the real client libraries VS Code's
// language client is built on (vscode-jsonrpc over the child's stdio,
// vscode-languageserver-protocol's request types).
//   node tests/e2e/lsp.test.mjs <laya binary> <model path>
// Exit 0: passed; 1: failed; 77: skipped (no node_modules or no model).
// Environment (measurement only): LAYA_LSP_ARGS extra `laya lsp` arguments
// ("--multi-line"); LAYA_E2E_TRACE=file writes the typed keystrokes as a
// typing trace, so `laya replay --fast` can time the same keystrokes in-process.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

const [laya, model] = process.argv.slice(2);
if (!laya || !model) {
  console.error('usage: node tests/e2e/lsp.test.mjs <laya binary> <model path>');
  process.exit(2);
}
// The protocol's node entry re-exports vscode-jsonrpc's node API (stream
// reader/writer, connection, cancellation) from the vscode-jsonrpc it was
// built with: 3.18 needs vscode-jsonrpc 10, and a request type of one
// vscode-jsonrpc instance is "Unknown parameter structure" to another (the
// top-level vscode-jsonrpc of package.json is 8.x).
let rpc, proto;
try {
  proto = (await import('vscode-languageserver-protocol/node')).default;
  rpc = proto;
} catch (e) {
  console.log(`skip: the npm packages are not installed (npm ci): ${e.message}`);
  process.exit(77);
}
if (!existsSync(model)) {
  console.log(`skip: no model at ${model}`);
  process.exit(77);
}

// A hang is a failure, not a CI timeout.
const deadline = setTimeout(() => {
  console.error('FAIL: the test did not finish in 60 s');
  process.exit(1);
}, 60_000);
deadline.unref();

const extra = (process.env.LAYA_LSP_ARGS || '').split(' ').filter(Boolean);
const child = spawn(laya, ['lsp', '-m', model, '-t', '1', '--awake-ms', '0', ...extra], { stdio: ['pipe', 'pipe', 'pipe'] });
let stderr = '';
child.stderr.on('data', (d) => { stderr += d; });
const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
const conn = rpc.createMessageConnection(new rpc.StreamMessageReader(child.stdout), new rpc.StreamMessageWriter(child.stdin));
conn.listen();

const cpLen = (s) => [...s].length;  // code points (the trace format's unit)
const pct = (v, p) => {
  const s = [...v].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};

async function main() {
  // ---- initialize: the capabilities
  const init = await conn.sendRequest(proto.InitializeRequest.type, {
    processId: process.pid,
    rootUri: null,
    capabilities: { general: { positionEncodings: ['utf-16'] }, textDocument: { inlineCompletion: {} } },
  });
  const caps = init.capabilities;
  assert.equal(caps.inlineCompletionProvider, true);
  assert.equal(caps.positionEncoding, 'utf-16');
  assert.equal(caps.textDocumentSync.change, proto.TextDocumentSyncKind.Incremental);
  conn.sendNotification(proto.InitializedNotification.type, {});

  // ---- open a file, type a line character by character
  const uri = 'file:///tmp/laya-e2e/main.py';
  let lines = ['import os', 'import sys', '', '', 'def main(argv):', '    ', '    return 0', ''];
  conn.sendNotification(proto.DidOpenTextDocumentNotification.type, {
    textDocument: { uri, languageId: 'python', version: 1, text: lines.join('\n') },
  });
  const initial = lines.join('\n');
  let version = 1;
  let line = 5;
  const trace = [{ op: 'insert', pos: 0, text: initial }, { op: 'move', pos: cpLen(lines.slice(0, 5).join('\n')) + 1 + 4 }];
  const typeAt = (ch, text) => {
    const pos = { line, character: ch };
    conn.sendNotification(proto.DidChangeTextDocumentNotification.type, {
      textDocument: { uri, version: ++version },
      contentChanges: [{ range: { start: pos, end: pos }, text }],
    });
    trace.push({ op: 'insert', pos: cpLen(lines.slice(0, line).join('\n')) + 1 + cpLen(lines[line].slice(0, ch)), text });
    lines[line] = lines[line].slice(0, ch) + text + lines[line].slice(ch);
  };
  const complete = (character, token) =>
    conn.sendRequest(proto.InlineCompletionRequest.type,
      { textDocument: { uri }, position: { line, character }, context: { triggerKind: proto.InlineCompletionTriggerKind.Automatic } },
      token);
  const latencies = [];
  let nonEmpty = 0;
  const typed = ['path = os.path.join(argv[0], "data")', 'print(path)'];
  for (let k = 0; k < typed.length; ++k) {
    if (k > 0) {  // Enter with auto-indent: a new line of four spaces
      const ch = lines[line].length;
      const pos = { line, character: ch };
      conn.sendNotification(proto.DidChangeTextDocumentNotification.type, {
        textDocument: { uri, version: ++version },
        contentChanges: [{ range: { start: pos, end: pos }, text: '\n    ' }],
      });
      trace.push({ op: 'insert', pos: cpLen(lines.slice(0, line).join('\n')) + 1 + ch, text: '\n    ' });
      lines.splice(line + 1, 0, '    ');
      ++line;
    }
    for (const c of typed[k]) {
      const ch = lines[line].length;
      const t0 = performance.now();
      typeAt(ch, c);
      const r = await complete(ch + 1);
      latencies.push(performance.now() - t0);
      assert.ok(r && Array.isArray(r.items), `keystroke ${c}: an InlineCompletionList, got ${JSON.stringify(r)}`);
      for (const it of r.items) {
        assert.equal(typeof it.insertText, 'string');
        assert.deepEqual(it.range, { start: { line, character: ch + 1 }, end: { line, character: ch + 1 } });
      }
      nonEmpty += r.items.length > 0;
    }
  }
  assert.ok(nonEmpty >= latencies.length / 2, `only ${nonEmpty} of ${latencies.length} keystrokes got a suggestion`);
  const n = latencies.length;
  console.log(`keystroke (didChange + inlineCompletion) -> response over stdio: n ${n}, ` +
    `p50 ${pct(latencies, 0.5).toFixed(3)} ms, p99 ${pct(latencies, 0.99).toFixed(3)} ms, max ${Math.max(...latencies).toFixed(3)} ms; ` +
    `${nonEmpty} non-empty`);
  if (process.env.LAYA_E2E_TRACE) {
    const text = lines.join('\n');
    const events = trace.map((e, i) => ({ t_ms: i * 100, ...e }));
    const header = { trace: 'lsp_e2e', lang: 'python', source: 'tests/e2e/lsp.test.mjs', seed: 0, chars: cpLen(text),
      events: events.length, duration_ms: events.at(-1).t_ms, median_key_ms: 100,
      final_sha256: createHash('sha256').update(text, 'utf8').digest('hex') };
    writeFileSync(process.env.LAYA_E2E_TRACE, [header, ...events].map((j) => JSON.stringify(j)).join('\n') + '\n');
    writeFileSync(`${process.env.LAYA_E2E_TRACE}.lsp_ms.json`, JSON.stringify(latencies));
    writeFileSync(`${process.env.LAYA_E2E_TRACE}.stderr`, stderr);  // with LAYA_LSP_ARGS=--timings: the server's side
  }

  // ---- cancel one request through the client's CancellationToken
  // (after a keystroke: a request at the same text and cursor as the last
  // one is answered from the session's cache at once, before any cancel)
  typeAt(lines[line].length, ' ');
  const src = new rpc.CancellationTokenSource();
  const pending = complete(lines[line].length, src.token);
  src.cancel();
  try {
    const r = await pending;  // it may have finished first: a result is fine
    assert.ok(r && Array.isArray(r.items));
    console.log('cancel: answered with a result (it finished first)');
  } catch (e) {
    assert.equal(e.code, proto.LSPErrorCodes.RequestCancelled, `cancel: ${e.message}`);
    console.log('cancel: RequestCancelled');
  }
  // A newer request supersedes one in flight: both are answered.
  const [a, b] = await Promise.all([complete(lines[line].length), complete(lines[line].length)]);
  assert.ok(Array.isArray(a.items) && Array.isArray(b.items));

  // ---- emoji and CJK before the cursor: the range is in UTF-16 units
  const uri2 = 'file:///tmp/laya-e2e/notes.py';
  const l0 = '# 中文 notes 😀 ok';
  const l1 = 's = "😀中" + ';
  conn.sendNotification(proto.DidOpenTextDocumentNotification.type, {
    textDocument: { uri: uri2, languageId: 'python', version: 1, text: `${l0}\n${l1}` },
  });
  const at = l1.length;  // JS strings are UTF-16: the emoji counts 2
  assert.equal(at, 12);
  const r2 = await conn.sendRequest(proto.InlineCompletionRequest.type, {
    textDocument: { uri: uri2 }, position: { line: 1, character: at }, context: { triggerKind: 1 } });
  assert.ok(Array.isArray(r2.items) && r2.items.length > 0, `emoji/CJK line: ${JSON.stringify(r2)}`);
  for (const it of r2.items) assert.deepEqual(it.range, { start: { line: 1, character: at }, end: { line: 1, character: at } });
  // A keystroke after the emoji (UTF-16 column 6 of line 1 is right after it), then a request there.
  conn.sendNotification(proto.DidChangeTextDocumentNotification.type, {
    textDocument: { uri: uri2, version: 2 },
    contentChanges: [{ range: { start: { line: 1, character: 7 }, end: { line: 1, character: 7 } }, text: 'x' }],
  });
  const r3 = await conn.sendRequest(proto.InlineCompletionRequest.type, {
    textDocument: { uri: uri2 }, position: { line: 1, character: 8 }, context: { triggerKind: 1 } });
  for (const it of r3.items) assert.deepEqual(it.range.start, { line: 1, character: 8 });
  conn.sendNotification(proto.DidCloseTextDocumentNotification.type, { textDocument: { uri: uri2 } });

  // ---- errors the client sees as errors
  await assert.rejects(conn.sendRequest('laya/noSuchMethod', {}), (e) => e.code === proto.ErrorCodes.MethodNotFound);
  await assert.rejects(conn.sendRequest(proto.InlineCompletionRequest.type,
    { textDocument: { uri: 'file:///not/open.py' }, position: { line: 0, character: 0 }, context: { triggerKind: 1 } }),
  (e) => e.code === proto.ErrorCodes.InvalidParams && /not an open document/.test(e.message));

  // ---- shutdown, exit: code 0
  await conn.sendRequest(proto.ShutdownRequest.type);
  conn.sendNotification(proto.ExitNotification.type);
  const { code, signal } = await exited;
  assert.equal(signal, null);
  assert.equal(code, 0, `exit code ${code}; stderr:\n${stderr}`);
  conn.dispose();
}

// Hostile bytes straight into the binary's stdin: every broken frame is
// answered with an error (id null), the good ones after it still work, and
// EOF without shutdown ends the process with code 1, never a hang.
async function hostile() {
  const p = spawn(laya, ['lsp', '-m', model, '-t', '1', '--awake-ms', '0'], { stdio: ['pipe', 'pipe', 'pipe'] });
  const done = new Promise((resolve) => p.on('exit', (code, signal) => resolve({ code, signal })));
  let out = Buffer.alloc(0);
  p.stdout.on('data', (d) => { out = Buffer.concat([out, d]); });
  p.stderr.on('data', () => {});
  const frame = (body) => {
    const b = Buffer.isBuffer(body) ? body : Buffer.from(body);
    return Buffer.concat([Buffer.from(`Content-Length: ${b.length}\r\n\r\n`), b]);
  };
  p.stdin.write('Content-Length: abc\r\n\r\n');
  p.stdin.write(frame('{not json'));
  p.stdin.write(frame('[]'));
  p.stdin.write(frame(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d])));  // {"a":"\xff"}
  p.stdin.write(frame('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{}}}'));
  p.stdin.write(frame('{"jsonrpc":"2.0","id":2,"method":"textDocument/inlineCompletion","params":{"textDocument":{"uri":7}}}'));
  p.stdin.end('Content-Length: 99999999999999\r\n\r\n{');
  const { code, signal } = await done;
  const replies = [];
  for (let s = out.toString('utf8'); s.length > 0;) {
    const m = /^Content-Length: (\d+)\r\n\r\n/.exec(s);
    assert.ok(m, `a frame: ${s.slice(0, 80)}`);
    const start = m[0].length;
    const body = Buffer.from(s.slice(start)).subarray(0, Number(m[1])).toString('utf8');
    replies.push(JSON.parse(body));
    s = s.slice(start + body.length);
  }
  const codes = replies.map((r) => (r.error ? r.error.code : 'ok'));
  assert.deepEqual(codes, [-32600, -32700, -32600, -32700, 'ok', -32602], JSON.stringify(replies));
  assert.match(replies[0].error.message, /Content-Length 'abc' is not a byte count/);
  assert.match(replies[5].error.message, /params\.textDocument: field "uri" is integer, expected a string/);
  assert.equal(signal, null);
  assert.equal(code, 1);
}

try {
  await hostile();
  await main();
  console.log('PASS lsp e2e');
  process.exit(0);
} catch (e) {
  console.error(`FAIL: ${e.stack || e}\n--- laya lsp stderr ---\n${stderr}`);
  child.kill();
  process.exit(1);
}
