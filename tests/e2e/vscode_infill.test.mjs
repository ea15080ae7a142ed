// End to end: llama.vscode's code completion request against `laya serve`, over real HTTP.
//   node tests/e2e/vscode_infill.test.mjs LAYA_BINARY MODEL
//
// The body is the one llama.vscode v0.0.63 builds (src/llama-server.ts, createRequestPayload(false, ...)
// with its defaultRequestParams, src/completion.ts for the prefix / suffix / prompt), field for field in
// its order, with the settings' defaults from its package.json: n_predict 128, max_parallel_completions 3
// (sent as n_cmpl), t_max_prompt_ms 500, t_max_predict_ms 500, ai_model "google/gemini-2.5-flash" (sent
// as "model": laya serves its own model whatever the name). The answer is read the way the plugin reads
// it (completion.ts getComplFromContent): an object with "content" is one completion, else an array whose
// distinct contents are the completions. Checks: three completions, distinct, the first equal to what a
// request for one completion gets (the greedy one), and the plugin's look-ahead request (the suggestion
// accepted: cacheFutureSuggestion's context) answered on the same session.
// Node's own fetch; no npm package needed.
import assert from 'node:assert/strict';
import { startServer } from './laya_serve.mjs';

const [laya, model] = process.argv.slice(2);
if (!laya || !model) {
  console.error('usage: node vscode_infill.test.mjs LAYA_BINARY MODEL');
  process.exit(2);
}


// llama.vscode's settings (package.json defaults) and createRequestPayload(noPredict = false, ...).
const configuration = { n_predict: 128, max_parallel_completions: 3, t_max_prompt_ms: 500, t_max_predict_ms: 500,
                        lora_completion: '', ai_model: 'google/gemini-2.5-flash' };
const defaultRequestParams = { top_k: 40, top_p: 0.99, stream: false, samplers: ['top_k', 'top_p', 'infill'], cache_prompt: true };
function createRequestPayload(inputPrefix, inputSuffix, chunks, prompt, model, nindent) {
  return {
    id_slot: 0,
    input_prefix: inputPrefix,
    input_suffix: inputSuffix,
    input_extra: chunks,
    prompt,
    n_predict: configuration.n_predict,
    n_cmpl: configuration.max_parallel_completions,
    ...defaultRequestParams,
    ...(nindent && { n_indent: nindent }),
    t_max_prompt_ms: configuration.t_max_prompt_ms,
    t_max_predict_ms: configuration.t_max_predict_ms,
    ...(configuration.lora_completion.trim() != '' && { lora: [{ id: 0, scale: 0.5 }] }),
    ...(model.trim() != '' && { model: model }),
  };
}
// completion.ts getComplFromContent
function getComplFromContent(codeCompletions) {
  if ('content' in codeCompletions) return [codeCompletions.content ?? ''];
  if (codeCompletions.length > 0) {
    const completions = new Set();
    for (const compl of codeCompletions) completions.add(compl.content ?? '');
    return Array.from(completions);
  }
  return [];
}

// A document and a cursor as completion.ts cuts them (n_prefix 256 lines, n_suffix 64).
const lines = ['import math', '', '', 'def circle_area(radius):', '    return math.pi * radius ** 2', '', '',
               'def mean(values):', '    total = ', '', '', 'print(mean([1, 2, 3]))'];
const line = 8, character = lines[line].length;
const linePrefix = lines[line].slice(0, character), lineSuffix = lines[line].slice(character);
const nindent = lines[line].length - lines[line].trimStart().length;
const inputPrefix = lines.slice(Math.max(0, line - 256), line).join('\n') + '\n';
const inputSuffix = lineSuffix + '\n' + lines.slice(line + 1, line + 1 + 64).join('\n') + '\n';
const chunks = [{ text: 'def median(values):\n    return sorted(values)[len(values) // 2]\n', time: Date.now(), filename: 'stats.py' }];

const { child, url } = startServer(laya, model, []);
let failed = false;
try {
  const base = await url;
  const post = async (body) => {
    const r = await fetch(`${base}/infill`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    const text = await r.text();
    assert.equal(r.status, 200, text);
    return JSON.parse(text);
  };
  const body = createRequestPayload(inputPrefix, inputSuffix, chunks, linePrefix, configuration.ai_model, nindent);
  assert.equal(body.n_cmpl, 3);
  const data = await post(body);
  assert.ok(Array.isArray(data) && data.length === 3, JSON.stringify(data).slice(0, 400));
  data.forEach((d, i) => assert.equal(d.index, i));
  const completions = getComplFromContent(data);
  assert.equal(completions.length, 3, `the plugin would offer ${completions.length} distinct completions: ${JSON.stringify(completions)}`);
  const one = await post({ ...body, n_cmpl: 1 });
  assert.ok(!Array.isArray(one) && 'content' in one, 'one completion is one object');
  assert.deepEqual(getComplFromContent(one), [completions[0]], 'the first completion is the one a single request gets');

  // cacheFutureSuggestion: the first completion accepted (a multi-line one moves lines into the prefix).
  const suggestionLines = completions[0].split(/\r?\n/);
  while (suggestionLines.length > 0 && suggestionLines.at(-1).trim() == '') suggestionLines.pop();
  if (suggestionLines.length > 0) {
    let futurePrefix = inputPrefix, futurePrompt = linePrefix + suggestionLines[0];
    if (suggestionLines.length > 1) {
      futurePrefix = inputPrefix + linePrefix + suggestionLines.slice(0, -1).join('\n') + '\n';
      futurePrompt = suggestionLines[suggestionLines.length - 1];
    }
    const ahead = await post(createRequestPayload(futurePrefix, inputSuffix, chunks, futurePrompt, configuration.ai_model, nindent));
    assert.ok(Array.isArray(ahead) && ahead.length === 3);
    assert.equal(ahead[0].laya.session, data[0].laya.session, 'the look-ahead goes to the same document');
    assert.equal(ahead[0].laya.new_session, false);
  }
  console.log(`ok: llama.vscode's body (n_cmpl 3) answered with ${completions.length} distinct completions`);
} catch (e) {
  failed = true;
  console.error(e);
} finally {
  child.kill();
}
process.exit(failed ? 1 : 0);
