// The fleet page (controller/ui/, served at /ui/) in a real browser: headless Debian chromium
// driven by playwright-core, against the real edge-controller and edge-agent binaries on
// loopback (ports picked at run time, everything in a temp dir). run.sh installs what is
// missing and starts this with:
//   node fleet_page_test.mjs --bin-dir DIR --modules DIR --out-dir DIR
// --modules: where playwright-core is installed (DIR/node_modules/playwright-core);
// --out-dir: screenshots (desktop and phone size) and, on failure, the daemons' logs.
//
// What it checks, in order: the /ui routes and headers over plain HTTP; sign-in with the
// keyboard; three agents online in the list (status in words); an agent stopped → its row
// says "offline" without a reload; a node's detail (config, metrics); a session started on an
// interactive tool, a prompt and its reply; a second window mirroring the session (replayed
// and live frames, same seq numbers); a reconnect with last_seq (no duplicate frames); the
// session ended in both windows; a fleet command's per-node grid (exit codes 0 and 3), a
// denied tool refused, a bad argument line caught; the phone layout without sideways
// scrolling; sign-out and a refused token. No CSP violation and no uncaught page error at any
// point.
import {spawn, spawnSync} from 'node:child_process';
import {createRequire} from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {fileURLToPath} from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

function parseFlags(argv) {
  const flags = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || argv[i + 1] === undefined) usage(`bad argument ${argv[i]}`);
    flags[argv[i].slice(2)] = argv[i + 1];
  }
  for (const k of ['bin-dir', 'modules', 'out-dir']) if (!flags[k]) usage(`--${k} is required`);
  return flags;
}
function usage(msg) {
  console.error(`fleet_page_test: ${msg}\nusage: node fleet_page_test.mjs --bin-dir DIR --modules DIR --out-dir DIR`);
  process.exit(2);
}

const flags = parseFlags(process.argv.slice(2));
const BIN = flags['bin-dir'];
const OUT = flags['out-dir'];
const CHROMIUM = process.env.EDGE_CHROMIUM || '/usr/bin/chromium';
const {chromium} = createRequire(path.join(flags.modules, 'package.json'))('playwright-core');
fs.mkdirSync(OUT, {recursive: true});

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'edge-browser-'));
const children = [];
let failed = false;
let step = 0;

function log(msg) {
  console.log(`[${new Date().toISOString().slice(11, 23)}] ${msg}`);
}
function ok(what) {
  step++;
  log(`ok ${step} - ${what}`);
}
class TestFailure extends Error {}
function check(cond, what) {
  if (!cond) throw new TestFailure(what);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, fn, timeoutMs = 30000, everyMs = 200) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new TestFailure(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await sleep(everyMs);
  }
}

// ---- the daemons ------------------------------------------------------------------------

function cli(args, timeoutMs = 30000) {
  const r = spawnSync(path.join(BIN, 'edge-controller'), ['--config', ctlConfig, ...args],
      {encoding: 'utf8', timeout: timeoutMs});
  return {code: r.status, out: r.stdout || '', err: r.stderr || ''};
}

class Daemon {
  constructor(name, argv) {
    this.name = name;
    this.outPath = path.join(tmp, `${name}.out`);
    this.errPath = path.join(tmp, `${name}.err`);
    const out = fs.openSync(this.outPath, 'w');
    const err = fs.openSync(this.errPath, 'w');
    this.proc = spawn(argv[0], argv.slice(1), {stdio: ['ignore', out, err]});
    fs.closeSync(out);
    fs.closeSync(err);
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, sig) => resolve(code ?? sig)));
    this.running = true;
    this.exited.then(() => (this.running = false));
    children.push(this);
  }
  stderr() {
    return fs.readFileSync(this.errPath, 'utf8');
  }
  async stop(signal = 'SIGTERM', waitMs = 15000) {
    if (!this.running) return;
    this.proc.kill(signal);
    const t = setTimeout(() => this.proc.kill('SIGKILL'), waitMs);
    await this.exited;
    clearTimeout(t);
  }
}

const ctlDir = path.join(tmp, 'ctl');
const ctlConfig = path.join(tmp, 'ctl.yaml');
fs.writeFileSync(ctlConfig, `data_dir: ${ctlDir}\ngrpc:\n  listen: 127.0.0.1:0\nhttp:\n  listen: 127.0.0.1:0\nlog:\n  level: debug\n`);

async function startController() {
  const d = new Daemon('controller', [path.join(BIN, 'edge-controller'), '--config', ctlConfig, 'serve']);
  const port = await until('the controller to start and log its HTTP port', () => {
    if (!d.running) throw new TestFailure(`the controller exited: ${d.stderr().slice(-2000)}`);
    const m = /HTTP on \S+ \(port (\d+)/.exec(d.stderr());
    return m && cli(['status', '--format', 'json']).code === 0 ? Number(m[1]) : null;
  }, 60000);
  return {daemon: d, port};
}

// An agent with a fresh join token bound to its node id; `tools` is YAML under `tools:`.
function startAgent(node, tools, labels = '') {
  const t = cli(['token', 'create', '--node', node, '--format', 'json']);
  check(t.code === 0, `token create for ${node}: ${t.err}`);
  const join = JSON.parse(t.out).join_token;
  const cfg = path.join(tmp, `agent-${node}.yaml`);
  fs.writeFileSync(cfg, `node_id: ${node}\ndata_dir: ${path.join(tmp, 'agent-' + node)}\n` +
      `controller:\n  join_token: "${join}"\nsandbox:\n  kill_grace: 1s\nlog:\n  level: debug\n` +
      `${labels}tools:\n${tools}`);
  return new Daemon(`agent-${node}`, [path.join(BIN, 'edge-agent'), '--config', cfg, 'run']);
}

// ---- plain HTTP checks of the /ui routes --------------------------------------------------

async function checkRoutes(base) {
  const r = await fetch(`${base}/ui`, {redirect: 'manual'});
  check(r.status === 301 && r.headers.get('location') === '/ui/', `/ui → 301 /ui/ (got ${r.status} ${r.headers.get('location')})`);
  const index = await fetch(`${base}/ui/`);
  const html = await index.text();
  check(index.status === 200, `/ui/ → 200 (got ${index.status})`);
  check(index.headers.get('content-type') === 'text/html; charset=utf-8', `index content type ${index.headers.get('content-type')}`);
  check(index.headers.get('cache-control') === 'no-cache', 'Cache-Control: no-cache');
  check(index.headers.get('x-content-type-options') === 'nosniff', 'X-Content-Type-Options: nosniff');
  const csp = index.headers.get('content-security-policy') || '';
  const host = new URL(base).host;
  for (const part of ["default-src 'self'", `connect-src 'self' ws://${host} wss://${host}`, "frame-ancestors 'none'"]) {
    check(csp.includes(part), `CSP has "${part}": ${csp}`);
  }
  check(html.includes('<script type="module" src="app.js">'), 'index.html loads app.js as a module');
  const js = await fetch(`${base}/ui/app.js`);
  const jsBody = await js.text();
  check(js.headers.get('content-type') === 'text/javascript; charset=utf-8', `app.js content type ${js.headers.get('content-type')}`);
  const head = await fetch(`${base}/ui/app.js`, {method: 'HEAD'});
  check(head.status === 200 && Number(head.headers.get('content-length')) === Buffer.byteLength(jsBody),
      `HEAD /ui/app.js: 200 with GET's length (got ${head.status}, ${head.headers.get('content-length')} vs ${Buffer.byteLength(jsBody)})`);
  check((await fetch(`${base}/ui/nope.js`)).status === 404, 'unknown file → 404');
  const post = await fetch(`${base}/ui/`, {method: 'POST'});
  check(post.status === 405 && post.headers.get('allow') === 'GET, HEAD', `POST /ui/ → 405 Allow GET, HEAD (got ${post.status} ${post.headers.get('allow')})`);
  ok('/ui routes: redirect, index, module, HEAD, 404, 405; no-cache, nosniff, strict CSP');
}

// ---- the browser ------------------------------------------------------------------------

const DESKTOP = {width: 1280, height: 900};
const PHONE = {width: 390, height: 844};
const pageErrors = [];

async function newPage(context, viewport = DESKTOP) {
  const page = await context.newPage();
  await page.setViewportSize(viewport);
  page.on('pageerror', (e) => pageErrors.push(`${page.url()}: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text())) {
      pageErrors.push(`CSP: ${m.text()}`);
    }
  });
  page.on('dialog', (d) => d.dismiss());
  return page;
}

async function shot(page, name, viewport) {
  if (viewport) await page.setViewportSize(viewport);
  await sleep(150);
  const file = path.join(OUT, `${name}.png`);
  await page.screenshot({path: file, fullPage: true});
  log(`screenshot ${file}`);
}

async function noSidewaysScroll(page, what) {
  const {sw, w} = await page.evaluate(() => ({sw: document.documentElement.scrollWidth, w: window.innerWidth}));
  check(sw <= w + 1, `${what}: the page scrolls sideways at ${w} px (content ${sw} px wide)`);
}

async function everyInputLabelled(page) {
  const bad = await page.evaluate(() => [...document.querySelectorAll('input, select, textarea')]
      .filter((el) => el.type !== 'hidden' && el.labels.length === 0 && !el.getAttribute('aria-label'))
      .map((el) => el.id || el.name || el.outerHTML.slice(0, 60)));
  check(bad.length === 0, `inputs without a label: ${bad.join(', ')}`);
}

async function signIn(page, base, token) {
  await page.goto(`${base}/ui/`);
  await page.locator('#signin').waitFor({state: 'visible'});
  await page.locator('#token').focus();
  await page.keyboard.insertText(token);
  await page.keyboard.press('Tab');
  check(await page.evaluate(() => document.activeElement?.textContent === 'Sign in'), 'Tab from the token reaches "Sign in"');
  await page.keyboard.press('Enter');
  await page.locator('#app').waitFor({state: 'visible'});
}

const row = (page, node) => page.locator(`#nodes-body tr[data-node="${node}"]`);
// The status word of a node's row (the shape beside it is aria-hidden).
const statusText = async (page, node) => (await row(page, node).locator('td[data-label="Status"] .word').textContent()).trim();

// [seq, type] of the numbered frames a page shows.
const numbered = (page) => page.evaluate(() => [...document.querySelectorAll('#frames .frame')]
    .filter((f) => f.dataset.seq !== '').map((f) => [Number(f.dataset.seq), f.dataset.type]));
const frameWith = (page, type, text) => page.locator(`#frames .frame[data-type="${type}"]`, {hasText: text});

async function sessionSteps(page, context, controller) {
  // A session on edge-01's interactive tool.
  await page.locator('#start-form button[type=submit]').click();
  await until('the session view or a start error', async () =>
    (await page.locator('#session').isVisible()) || (await page.locator('#start-error').isVisible()), 60000);
  if (await page.locator('#start-error').isVisible()) {
    throw new TestFailure(`starting a session failed: ${await page.locator('#start-error').textContent()}`);
  }
  const sessionId = await page.locator('#session').getAttribute('data-session');
  check(/^[0-9a-f-]{36}$/.test(sessionId), `session id ${sessionId}`);
  await until('the socket to connect', async () => (await page.locator('#session').getAttribute('data-conn')) === 'connected', 60000);
  await frameWith(page, 'agent.output', 'echo agent ready').waitFor({timeout: 60000});
  ok(`session ${sessionId} started; its process's first line streamed in as agent.output`);
  await until('edge-01 to count one active session', async () =>
    (await row(page, 'edge-01').locator('td[data-label="Active sessions"]').textContent()) === '1', 15000);

  await page.locator('#prompt').fill('hello from the browser');
  await page.locator('#prompt').press('Enter');
  await frameWith(page, 'control.prompt.request', 'hello from the browser').waitFor({timeout: 30000});
  await frameWith(page, 'agent.message', 'echo: hello from the browser').waitFor({timeout: 30000});
  check(await page.locator('#frames .frame[data-type="pending"]').count() === 0, 'the prompt was acknowledged by its echo');
  const seqs = (await numbered(page)).map(([s]) => s);
  check(seqs.length >= 3 && seqs.every((s, i) => i === 0 || s > seqs[i - 1]), `seq numbers rise: ${seqs}`);
  check(await frameWith(page, 'control.prompt.request', 'from this window').count() === 1, 'the prompt is marked as from this window');
  ok('a prompt typed in the page came back echoed (with seq) and the agent replied "echo: hello from the browser"');

  // The mirror: the session list's "New window" opens #session=<id> in a second window, which
  // gets a copy of the token (sessionStorage) and a ticket of its own.
  const listed = page.locator(`#sessions-body tr[data-session="${sessionId}"]`);
  await listed.waitFor({timeout: 15000});
  check(/echo-agent/.test(await listed.textContent()) && /edge-01/.test(await listed.textContent()), 'the session list names the node and agent');
  const [mirror] = await Promise.all([context.waitForEvent('page'),
    listed.getByRole('button', {name: `Mirror session ${sessionId} in a new window`}).click()]);
  mirror.on('pageerror', (e) => pageErrors.push(`mirror: ${e.message}`));
  await mirror.setViewportSize(DESKTOP);
  await mirror.locator('#session').waitFor({state: 'visible', timeout: 30000});
  check(await mirror.locator('#session').getAttribute('data-session') === sessionId, 'the mirror shows the same session');
  await until('the mirror to connect', async () => (await mirror.locator('#session').getAttribute('data-conn')) === 'connected', 60000);
  await frameWith(mirror, 'control.prompt.request', 'hello from the browser').waitFor({timeout: 30000});
  await frameWith(mirror, 'agent.message', 'echo: hello from the browser').waitFor({timeout: 30000});
  ok('a second window on the session (its own ticket) replayed the prompt and the reply');

  await mirror.locator('#prompt').fill('second, from the mirror');
  await mirror.locator('#prompt-send').click();
  for (const [p, name] of [[page, 'first window'], [mirror, 'mirror']]) {
    await frameWith(p, 'control.prompt.request', 'second, from the mirror').waitFor({timeout: 30000});
    await frameWith(p, 'agent.message', 'echo: second, from the mirror').waitFor({timeout: 30000});
    log(`  the ${name} shows the mirror's prompt and its reply`);
  }
  check(await frameWith(page, 'control.prompt.request', 'from another window').count() === 1, 'the first window marks the mirror\'s prompt as from another window');
  await until('both windows to show the same numbered frames', async () => {
    const [a, b] = [await numbered(page), await numbered(mirror)];
    return JSON.stringify(a) === JSON.stringify(b) && a.length > 0;
  }, 15000);
  ok('a prompt from the mirror reached the agent once and both windows show the same seq-numbered stream');

  // The node's tools change (a pushed config adds one): node.config.changed reaches both
  // windows, and the page pulls the node's config again (the frame carries no values).
  check(!/extra-tool/.test(await page.locator('#config').textContent()), 'no extra-tool yet');
  const delta = path.join(tmp, 'delta.yaml');
  fs.writeFileSync(delta, 'tools:\n  extra-tool:\n    command: ["true"]\n');
  const push = cli(['push-config', '--node', 'edge-01', delta, '--version', 'browser-2']);
  check(push.code === 0, `push-config: ${push.err}`);
  for (const p of [page, mirror]) {
    await frameWith(p, 'node.config.changed', 'capabilities').waitFor({timeout: 30000});
  }
  await until('the detail to show the new tool', async () => /extra-tool/.test(await page.locator('#config').textContent()), 15000);
  ok('a pushed tool: node.config.changed (capabilities) in both windows, the node\'s config pulled again');

  // Reconnect: a new ticket, last_seq; nothing is shown twice.
  const before = await numbered(page);
  const lastSeq = before[before.length - 1][0];
  await page.locator('#session-reconnect').click();
  // The controller logs each socket with the last_seq it asked for.
  await until(`a socket with last_seq ${lastSeq} in the controller's log`, () =>
    new RegExp(`session ${sessionId}: socket \\d+ of alice from \\S+ \\(last_seq ${lastSeq}\\)`).test(controller.stderr()), 30000);
  await until('the reconnect', async () => (await page.locator('#session').getAttribute('data-conn')) === 'connected', 60000);
  await page.locator('#prompt').fill('after the reconnect');
  await page.locator('#prompt').press('Enter');
  await frameWith(page, 'agent.message', 'echo: after the reconnect').waitFor({timeout: 30000});
  const after = await numbered(page);
  check(JSON.stringify(after.slice(0, before.length)) === JSON.stringify(before), 'the frames before the reconnect are unchanged');
  const allSeqs = after.map(([s]) => s);
  check(new Set(allSeqs).size === allSeqs.length, `no frame shown twice after the reconnect: ${allSeqs}`);
  check(await frameWith(page, 'agent.message', 'echo: hello from the browser').count() === 1, 'the first reply is shown once');
  ok('Reconnect took a new ticket and resumed from last_seq without duplicates');

  await shot(page, 'session-desktop', DESKTOP);
  await shot(page, 'session-phone', PHONE);
  await noSidewaysScroll(page, 'session view on a phone');
  await page.setViewportSize(DESKTOP);

  // End it: both windows see session.ended, the prompt is disabled, the list drops it.
  await page.locator('#session-end').click();
  for (const p of [page, mirror]) {
    await p.locator('#frames .frame[data-type="session.ended"]').waitFor({timeout: 60000});
    await until('the view to say ended', async () => (await p.locator('#session').getAttribute('data-conn')) === 'ended', 30000);
    check(await p.locator('#prompt').isDisabled(), 'the prompt is disabled once the session ended');
  }
  await until('the ended session to leave the list', async () =>
    (await page.locator(`#sessions-body tr[data-session="${sessionId}"]`).count()) === 0, 30000);
  await until('edge-01 to count no active session', async () =>
    (await row(page, 'edge-01').locator('td[data-label="Active sessions"]').textContent()) === '0', 15000);
  ok('End session: session.ended in both windows, prompt disabled, gone from the session list and the count');
  await mirror.close();
}

async function fleetSteps(page) {
  // A bad argument line is caught on the page.
  await page.locator('#fleet-selector').fill('tag:group=browser,os:linux');
  await page.locator('#fleet-tool').fill('greet');
  await page.locator('#fleet-args').fill('novalue');
  await page.locator('#fleet-run').click();
  await page.locator('#fleet-error', {hasText: 'must be key=value'}).waitFor({timeout: 5000});
  // A denied tool is refused by the controller (http.denied_tools).
  await page.locator('#fleet-tool').fill('exec');
  await page.locator('#fleet-args').fill('command=true');
  await page.locator('#fleet-run').click();
  await page.locator('#fleet-error', {hasText: '403 PERMISSION_DENIED'}).waitFor({timeout: 30000});
  ok('fleet form: a bad argument line is refused on the page, a denied tool (exec) with 403 PERMISSION_DENIED');

  await page.locator('#fleet-tool').fill('greet');
  await page.locator('#fleet-args').fill('# no arguments needed\n');
  await page.locator('#fleet-run').click();
  await page.locator('#fleet-result').waitFor({state: 'visible', timeout: 30000});
  // edge-02 answers at once, edge-01 after 5 s: the grid fills in while the command runs.
  await until('edge-02 done while edge-01 still runs', async () => page.evaluate(() => {
    const st = (n) => document.querySelector(`#fleet-body tr[data-node="${n}"]`)?.dataset.state;
    return document.querySelector('#fleet-result').dataset.state === 'running' &&
        st('edge-02') === 'ok' && ['running', 'pending'].includes(st('edge-01'));
  }), 30000, 100);
  check(await page.locator('#fleet-cancel').isVisible(), 'a running fleet command can be cancelled');
  await until('the fleet command to complete', async () =>
    (await page.locator('#fleet-result').getAttribute('data-state')) === 'completed', 90000, 300);
  const grid = await page.evaluate(() => [...document.querySelectorAll('#fleet-body tr')].map((tr) => ({
    node: tr.dataset.node, state: tr.dataset.state, shown: tr.querySelector('.pstate').textContent,
    exit: tr.querySelector('td[data-label="Exit code"]').textContent,
    duration: tr.querySelector('td[data-label="Duration"]').textContent,
  })));
  const by = Object.fromEntries(grid.map((g) => [g.node, g]));
  check(grid.length === 2 && by['edge-01'] && by['edge-02'], `the grid has edge-01 and edge-02 (edge-03 is offline): ${JSON.stringify(grid)}`);
  check(by['edge-01'].state === 'ok' && by['edge-01'].exit === '0' && by['edge-01'].shown === 'succeeded',
      `edge-01: ran, exit 0, shown as succeeded (${JSON.stringify(by['edge-01'])})`);
  check(by['edge-02'].state === 'ok' && by['edge-02'].exit === '3' && by['edge-02'].shown === 'failed',
      `edge-02: ran, exit 3, shown as failed (${JSON.stringify(by['edge-02'])})`);
  check(grid.every((g) => g.duration !== '—'), `every part has a duration: ${JSON.stringify(grid)}`);
  const summary = await page.locator('#fleet-summary').textContent();
  check(/completed \(1 succeeded, 1 failed\)/.test(summary), `the summary says completed with the tally: ${summary}`);
  ok(`fleet command over tag:group=browser,os:linux: the per-node grid filled in (${grid.map((g) => `${g.node} ${g.shown} exit ${g.exit} ${g.duration}`).join('; ')})`);
  check(await page.locator('#fleet-cancel').isHidden(), 'no cancel button once completed');
  await shot(page, 'fleet-desktop', DESKTOP);
  await shot(page, 'fleet-phone', PHONE);
  await noSidewaysScroll(page, 'fleet grid on a phone');
  await page.setViewportSize(DESKTOP);

  // Cancel: a part that would run two minutes ends cancelled.
  await page.locator('#fleet-selector').fill('node:edge-01');
  await page.locator('#fleet-tool').fill('slow');
  await page.locator('#fleet-args').fill('');
  await page.locator('#fleet-run').click();
  await until('the slow part to run', async () =>
    (await page.locator('#fleet-body tr[data-node="edge-01"]').getAttribute('data-state')) === 'running', 30000);
  await page.locator('#fleet-cancel').click();
  await until('the cancelled fleet command to complete', async () =>
    (await page.locator('#fleet-result').getAttribute('data-state')) === 'completed', 60000, 300);
  const cancelled = await page.locator('#fleet-body tr[data-node="edge-01"]').textContent();
  check(/cancelled/.test(cancelled) && /CANCELLED/.test(cancelled), `the part shows cancelled with its error: ${cancelled}`);
  ok('Cancel fleet command: the running part ended cancelled (CANCELLED)');
}

async function main() {
  check(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing (run.sh installs Debian's chromium)`);
  const {daemon: ctl, port} = await startController();
  const base = `http://127.0.0.1:${port}`;
  log(`controller up, HTTP on ${base}, temp dir ${tmp}`);
  await checkRoutes(base);

  const node = process.execPath;
  const echoAgent = path.join(here, 'echo_agent.mjs');
  const agents = {
    'edge-01': startAgent('edge-01',
        `  echo-agent:\n    command: ["${node}", "${echoAgent}"]\n    interactive: true\n` +
        `  greet:\n    command: ["sh", "-c", "sleep 5; echo hello from edge-01"]\n` +
        `  slow:\n    command: ["sleep", "120"]\n`,
        'labels:\n  agent.device_name: bench-laptop\n'),
    'edge-02': startAgent('edge-02', '  greet:\n    command: ["sh", "-c", "echo failing on edge-02; exit 3"]\n'),
    'edge-03': startAgent('edge-03', '  greet:\n    command: ["echo", "hi"]\n'),
  };
  const tok = cli(['user', 'token', 'create', '--user', 'alice', '--tenant', 'default', '--ttl', '1h']);
  check(tok.code === 0, `user token create: ${tok.err}`);
  const token = tok.out.trim();

  const profile = fs.mkdtempSync(path.join(tmp, 'chromium-profile-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  await context.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  try {
    const page = await newPage(context);
    await page.goto(`${base}/ui/`);
    await page.locator('#signin').waitFor({state: 'visible'});
    await everyInputLabelled(page);
    await signIn(page, base, token);
    ok('signed in with the keyboard (token pasted, Tab, Enter)');

    for (const n of Object.keys(agents)) {
      await until(`${n} online in the list`, async () => (await row(page, n).count()) === 1 && (await statusText(page, n)) === 'online', 90000);
    }
    check(/bench-laptop/.test(await row(page, 'edge-01').textContent()), 'edge-01 shows its device name');
    check(/echo-agent/.test(await row(page, 'edge-01').locator('td[data-label="Tools"]').textContent()), 'edge-01 lists its tools');
    check(/capabilities v\d+/.test(await row(page, 'edge-01').locator('td[data-label="Config versions"]').textContent()), 'config versions shown');
    check(/^Last updated \d\d:\d\d:\d\d$/.test(await page.locator('#updated').textContent()), 'a "last updated" time is shown');
    await everyInputLabelled(page);
    ok('three nodes online in the list, with device name, tools, config versions and a last-updated time');

    // Operator tags appear as they are set, without a reload.
    for (const n of Object.keys(agents)) {
      const t = cli(['tag', '--node', n, 'add', 'group=browser', `name=${n}`]);
      check(t.code === 0, `tag ${n}: ${t.err}`);
    }
    await until('the tags in the list', async () =>
      (await row(page, 'edge-02').locator('td[data-label="Tags"]').textContent()) === 'group=browser, name=edge-02', 30000);
    ok('operator tags set on the admin socket show up in the list by themselves');

    // An agent stops: its row says offline, without a reload.
    await page.evaluate(() => { window.__sameDocument = true; });
    const updated = await page.locator('#updated').textContent();
    await agents['edge-03'].stop();
    await until('edge-03 to show offline', async () => (await statusText(page, 'edge-03')) === 'offline', 30000);
    check(await page.evaluate(() => window.__sameDocument === true), 'the page was not reloaded');
    check((await page.locator('#updated').textContent()) !== updated, 'the last-updated time moved on');
    check((await statusText(page, 'edge-01')) === 'online', 'edge-01 still online');
    ok('edge-03\'s agent stopped → its row says "offline" (in words), no reload');
    await shot(page, 'nodes-desktop', DESKTOP);

    // A node's detail.
    // …opened with the keyboard: focus the node's button, Enter; focus moves into the detail.
    await row(page, 'edge-01').getByRole('button', {name: 'Open node edge-01'}).focus();
    await page.keyboard.press('Enter');
    await page.locator('#node').waitFor({state: 'visible'});
    check(await page.evaluate(() => document.activeElement?.id) === 'node-h', 'focus moved to the node detail');
    await until('the node config', async () => /Capabilities version/.test(await page.locator('#config').textContent()), 30000);
    check(/echo-agent/.test(await page.locator('#config').textContent()), 'config lists the tools');
    check(/drop_oldest|disconnect/.test(await page.locator('#config').textContent()), 'config shows the limits');
    await until('the metrics (or why not)', async () => (await page.locator('#metrics').textContent()).length > 0, 30000);
    const metrics = await page.locator('#metrics').textContent();
    log(`  metrics: ${metrics.replace(/\s+/g, ' ').slice(0, 200)}`);
    check(/Input tokens/.test(metrics) && /Tool invocations/.test(metrics), `the metrics are shown: ${metrics}`);
    await page.locator('#metrics-period').selectOption('month');
    await until('the month\'s metrics', async () => /Periodmonth/.test(await page.locator('#metrics').textContent()), 15000);
    check(await page.locator('#agent-name').inputValue() === 'echo-agent', 'the agent field is prefilled with the interactive tool');
    ok('node detail: config (limits and tools), metrics, agent prefilled "echo-agent"');

    await sessionSteps(page, context, ctl);
    await page.locator('#metrics-form button[type=submit]').click();
    await until('the session\'s usage in the metrics', async () =>
      Number((/Input tokens(\d+)/.exec(await page.locator('#metrics').textContent()) || [])[1]) > 0, 15000);
    ok('the session\'s session.usage frames show in the node\'s metrics (month)');
    await fleetSteps(page);

    // The phone: a fresh window signs in; the list is readable as cards, no sideways scroll.
    const phone = await newPage(context, PHONE);
    await signIn(phone, base, token);
    await until('the phone list', async () => (await statusText(phone, 'edge-01')) === 'online', 30000);
    check((await statusText(phone, 'edge-03')) === 'offline', 'the phone shows edge-03 offline');
    await noSidewaysScroll(phone, 'node list on a phone');
    await shot(phone, 'nodes-phone');
    ok('phone size (390×844): node list as cards, statuses in words, no sideways scrolling');

    // Sign out; a refused token.
    await phone.locator('#signout').click();
    await phone.locator('#signin').waitFor({state: 'visible'});
    check(await phone.evaluate(() => sessionStorage.length === 0), 'sign-out forgets the token');
    await phone.locator('#token').fill(token.slice(0, -4) + 'AAAA');
    await phone.locator('#signin-form button[type=submit]').click();
    await phone.locator('#signin-error', {hasText: '401'}).waitFor({timeout: 15000});
    check(await phone.locator('#app').isHidden(), 'a refused token does not get in');
    ok('sign-out clears the token; a forged token is refused with 401 on the sign-in form');

    // The control: an inline style is refused by the page's CSP, and both listeners see it.
    const mark = pageErrors.length;
    await phone.evaluate(() => {
      const d = document.createElement('div');
      d.setAttribute('style', 'color: red');
      document.body.append(d);
    });
    await until('the CSP to refuse an inline style', async () => (await phone.evaluate(() => window.__csp.length)) === 1, 10000);
    check(/style-src/.test(await phone.evaluate(() => window.__csp[0])), 'the refusal names style-src');
    await phone.evaluate(() => { window.__csp = []; });
    await until('the console to report the refusal', () => pageErrors.length > mark, 10000);
    check(pageErrors.slice(mark).every((e) => /^CSP: .*style-src/.test(e)), `only the control's refusal: ${pageErrors.slice(mark)}`);
    pageErrors.splice(mark);
    ok('the CSP is enforced: an inline style set by a script is refused and reported');

    for (const p of context.pages()) {
      const csp = await p.evaluate(() => window.__csp || []).catch(() => []);
      pageErrors.push(...csp.map((c) => `CSP violation: ${c}`));
    }
    check(pageErrors.length === 0, `page errors or CSP violations:\n  ${pageErrors.join('\n  ')}`);
    ok('no CSP violation and no uncaught error in any window');

    // The controller goes away: the signed-in window says so in its banner and keeps trying.
    await ctl.stop();
    await page.locator('#banner', {hasText: 'Could not load the node list'}).waitFor({timeout: 15000});
    check(/network error/.test(await page.locator('#banner').textContent()), 'the banner says why');
    check(await page.locator('#app').isVisible(), 'still signed in (not a 401)');
    check(/^Last updated \d\d:\d\d:\d\d \(refresh failing\)$/.test(await page.locator('#updated').textContent()), 'the list says it is not current');
    await shot(page, 'banner-desktop', DESKTOP);
    ok('controller stopped: the error banner names the failed call and why; the page stays');
  } catch (e) {
    for (const p of context.pages()) {
      await p.screenshot({path: path.join(OUT, `failure-${context.pages().indexOf(p)}.png`), fullPage: true}).catch(() => {});
    }
    throw e;
  } finally {
    await context.close();
  }
}

async function cleanup() {
  for (const c of children.reverse()) await c.stop('SIGTERM', 10000).catch(() => {});
  if (failed) {
    const logs = path.join(OUT, 'logs');
    fs.mkdirSync(logs, {recursive: true});
    for (const f of fs.readdirSync(tmp)) {
      if (/\.(out|err|yaml)$/.test(f)) fs.copyFileSync(path.join(tmp, f), path.join(logs, f));
    }
    console.error(`logs of the daemons: ${logs}`);
  }
  fs.rmSync(tmp, {recursive: true, force: true});
}

const watchdog = setTimeout(() => {
  console.error('fleet_page_test: the whole test took longer than 10 minutes');
  failed = true;
  cleanup().finally(() => process.exit(1));
}, 10 * 60 * 1000);

try {
  await main();
  console.log(`${step} passed, 0 failed`);
} catch (e) {
  failed = true;
  console.error(`FAILED after ${step} passed step(s): ${e instanceof TestFailure ? e.message : e.stack}`);
  for (const c of children) {
    if (c.name === 'controller') console.error(`--- controller stderr (last 3000 bytes)\n${c.stderr().slice(-3000)}`);
  }
}
clearTimeout(watchdog);
await cleanup();
process.exit(failed ? 1 : 0);
