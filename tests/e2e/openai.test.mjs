// End to end with the real `openai` npm package against `laya serve`:
// completions (plain and streamed: the streamed pieces concatenate to the
// plain text), FIM through `suffix`, the model list, the API key, and a bad
// request surfacing as the client's APIError with status 400.
//   node tests/e2e/openai.test.mjs LAYA_BINARY MODEL
// Exit 77 (skipped) when the npm packages are not installed (scripts/deps.sh).
import assert from 'node:assert/strict';
import { startServer } from './laya_serve.mjs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
let OpenAI;
try {
  OpenAI = (await import('openai')).default;
} catch (e) {
  console.log('SKIP: the openai npm package is not installed (run scripts/deps.sh or npm ci)');
  process.exit(77);
}
const [laya, model] = process.argv.slice(2);
if (!laya || !model) {
  console.error('usage: node openai.test.mjs LAYA_BINARY MODEL');
  process.exit(2);
}


const { child, url } = startServer(laya, model, ['--api-key', 'e2e-key']);
let failed = false;
try {
  const base = await url;
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'e2e-key', maxRetries: 0, timeout: 60000 });

  const models = await client.models.list();
  assert.ok(models.data.length === 1 && models.data[0].id.endsWith('.gguf'), JSON.stringify(models.data));
  const id = models.data[0].id;

  const prompt = 'def fibonacci(n):\n    ';
  const plain = await client.completions.create({ model: id, prompt, max_tokens: 8, temperature: 0 });
  assert.equal(plain.object, 'text_completion');
  assert.equal(plain.choices.length, 1);
  const text = plain.choices[0].text;
  assert.ok(typeof text === 'string' && text.length > 0, `empty completion: ${JSON.stringify(plain)}`);
  assert.ok(['length', 'stop'].includes(plain.choices[0].finish_reason));
  assert.equal(plain.usage.completion_tokens <= 8, true);

  const stream = await client.completions.create({ model: id, prompt, max_tokens: 8, temperature: 0, stream: true });
  let streamed = '';
  let finish = null;
  let chunks = 0;
  for await (const chunk of stream) {
    streamed += chunk.choices[0].text;
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
    chunks++;
  }
  assert.equal(streamed, text, 'streamed pieces differ from the plain completion');
  assert.equal(finish, plain.choices[0].finish_reason);
  assert.ok(chunks >= 2, `expected several chunks, got ${chunks}`);

  // Fill in the middle through `suffix`, and a stop string.
  const fim = await client.completions.create({ model: id, prompt: 'x = [1, 2, ', suffix: ']\nprint(x)\n', max_tokens: 6, temperature: 0, stop: ['\n'] });
  assert.ok(!fim.choices[0].text.includes('\n'), JSON.stringify(fim.choices[0]));

  await assert.rejects(
    client.completions.create({ model: id, prompt: 'a', max_tokens: -3 }),
    (e) => e.status === 400 && /max_tokens/.test(e.message),
  );
  const wrong = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'not-the-key', maxRetries: 0 });
  await assert.rejects(wrong.models.list(), (e) => e.status === 401);
  console.log(`ok: completion ${JSON.stringify(text)}, ${chunks} stream chunks, fim ${JSON.stringify(fim.choices[0].text)}`);
} catch (e) {
  failed = true;
  console.error('FAIL:', e);
} finally {
  child.kill('SIGTERM');
}
process.exit(failed ? 1 : 0);
