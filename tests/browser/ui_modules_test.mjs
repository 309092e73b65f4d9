// The fleet page's pure helpers under node's test runner (ctest: fleet_page_modules): the
// fleet form's argument lines, the interactive-tool guess, UUIDv4s, times and durations. The
// modules are imported from controller/ui/ as the browser loads them (they touch the DOM
// only when called to render).
import {test} from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import {fileURLToPath, pathToFileURL} from 'node:url';

const ui = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'controller', 'ui');
const load = (name) => import(pathToFileURL(path.join(ui, name)).href);
const {parseArgs} = await load('fleet.js');
const {guessAgent} = await load('nodes.js');
const {uuid4, formatDuration, formatAgo, formatTime} = await load('dom.js');
const {ApiError} = await load('api.js');

test('argument lines are read as `edge-controller invoke --arg` reads them', () => {
  assert.deepEqual(parseArgs(''), {});
  assert.deepEqual(parseArgs('\n  \n# a comment\n   # indented comment\n'), {});
  assert.deepEqual(parseArgs('n=3\nf=1.5\nb=true\nq="quoted"\na=[1,"x"]\no={"k":1}\nt=plain text'),
      {n: 3, f: 1.5, b: true, q: 'quoted', a: [1, 'x'], o: {k: 1}, t: 'plain text'});
  // null is not one of the kinds the CLI takes as JSON: it stays text.
  assert.deepEqual(parseArgs('x=null'), {x: 'null'});
  assert.deepEqual(parseArgs('command=a=b c'), {command: 'a=b c'});
  assert.deepEqual(parseArgs('empty='), {empty: ''});
  assert.deepEqual(parseArgs('k = v\r\nw=1\r\n'), {k: ' v', w: 1});
  assert.deepEqual(parseArgs('path=notes/a.txt'), {path: 'notes/a.txt'});
});

test('bad argument lines are refused naming the line', () => {
  assert.throws(() => parseArgs('a=1\nnovalue'), /line 2 \("novalue"\) must be key=value/);
  assert.throws(() => parseArgs('=v'), /line 1 \("=v"\) must be key=value/);
  assert.throws(() => parseArgs('  =v'), /line 1: the key is empty/);
  assert.throws(() => parseArgs('a=1\n\na=2'), /line 3: "a" is given twice/);
  assert.throws(() => parseArgs('x'.repeat(100)), /\("x{60}"\)/, 'the quoted line is cut');
});

test('the agent field is prefilled with the likeliest interactive tool', () => {
  assert.equal(guessAgent(['exec', 'file.read', 'greet', 'my-agent', 'session.start']), 'my-agent');
  assert.equal(guessAgent(['sysinfo', 'chat', 'deploy']), 'chat');
  assert.equal(guessAgent(['exec', 'deploy', 'backup']), 'deploy', 'else the first own tool');
  assert.equal(guessAgent(['exec', 'chat', 'deploy'], ['deploy']), 'deploy',
      'the interactive_tools the controller names come first');
  assert.equal(guessAgent(['exec', 'chat'], []), 'chat', 'an empty list falls back to guessing');
  assert.equal(guessAgent(['exec', 'file.search', 'session.input', 'sysinfo']), '', 'built-ins only');
  assert.equal(guessAgent(undefined), '');
});

test('UUIDv4s, with and without crypto.randomUUID', () => {
  const v4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  assert.match(uuid4(), v4);
  const saved = crypto.randomUUID;
  try {
    crypto.randomUUID = undefined;  // a page on plain http to another host
    const ids = new Set(Array.from({length: 200}, () => uuid4()));
    assert.equal(ids.size, 200);
    for (const id of ids) assert.match(id, v4);
  } finally {
    crypto.randomUUID = saved;
  }
});

test('durations, ages and times', () => {
  assert.equal(formatDuration(null), '—');
  assert.equal(formatDuration(0), '0 ms');
  assert.equal(formatDuration(999), '999 ms');
  assert.equal(formatDuration(1234), '1.2 s');
  assert.equal(formatDuration(95000), '1 min 35 s');
  assert.equal(formatAgo(-5), '0 s ago');
  assert.equal(formatAgo(59_000), '59 s ago');
  assert.equal(formatAgo(61_000), '1 min ago');
  assert.equal(formatAgo(3 * 3600_000), '3 h ago');
  assert.equal(formatAgo(72 * 3600_000), '3 days ago');
  const now = Date.parse('2026-11-25T01:02:13Z');
  assert.equal(formatTime('2026-11-25T01:02:03Z', now), '2026-11-25 01:02:03 UTC (10 s ago)');
  assert.equal(formatTime('2026-11-25T01:02:03.5+00:00', now), '2026-11-25 01:02:03 UTC (10 s ago)');
  assert.equal(formatTime('', now), '—');
  assert.equal(formatTime('not a time', now), 'not a time');
});

test('API errors read as status, code and message', () => {
  assert.equal(new ApiError(404, 'NOT_FOUND', 'no such node').describe(), '404 NOT_FOUND: no such node');
  assert.equal(new ApiError(0, 'NETWORK', 'network error: x').describe(), 'network error: x');
});
