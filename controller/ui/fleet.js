// The fleet command form and its per-node grid: POST /v1/edge/fleet/commands, then
// GET /v1/edge/fleet/commands/{id} every second until the command is completed (parts fill in
// as their nodes answer); cancel with POST …/{id}/cancel.
import {h, $, setText, show, formatDuration} from './dom.js';

const POLL_MS = 1000;

// "key=value" lines → an args object, as `edge-controller invoke --arg k=v` reads them: a value
// that parses as a JSON number, boolean, string, array or object is that JSON, anything else
// is the text. Blank lines and lines starting with '#' are skipped. Throws an Error naming
// the line when one is not key=value or a key repeats.
export function parseArgs(text) {
  const args = {};
  const lines = String(text || '').split('\n');
  lines.forEach((raw, i) => {
    const line = raw.replace(/\r$/, '');
    if (!line.trim() || line.trimStart().startsWith('#')) return;
    const eq = line.indexOf('=');
    if (eq <= 0) throw new Error(`argument line ${i + 1} ("${line.slice(0, 60)}") must be key=value`);
    const key = line.slice(0, eq).trim();
    if (!key) throw new Error(`argument line ${i + 1}: the key is empty`);
    if (Object.hasOwn(args, key)) throw new Error(`argument line ${i + 1}: "${key}" is given twice`);
    args[key] = argValue(line.slice(eq + 1));
  });
  return args;
}

function argValue(v) {
  try {
    const j = JSON.parse(v);
    if (j !== null) return j;
  } catch {
    // not JSON: the text
  }
  return v;
}

const STATE_WORDS = {
  pending: 'pending', running: 'running', error: 'error', timed_out: 'timed out',
  cancelled: 'cancelled',
};

// A part as the grid shows it: a part that ran (state ok) succeeded only with exit code 0, as
// `edge-controller fleet invoke` counts it; [word, css class].
function partState(p) {
  if (p.state === 'ok') return p.exit_code === 0 ? ['succeeded', 'ok'] : ['failed', 'failed'];
  return [STATE_WORDS[p.state] || p.state || 'unknown', p.state || 'unknown'];
}

export class FleetPanel {
  constructor({api, onError}) {
    this.api = api;
    this.onError = onError;
    this.id = null;
    this.timer = null;
    $('fleet-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.run();
    });
    $('fleet-cancel').addEventListener('click', () => this.cancel());
  }

  stop() {
    clearTimeout(this.timer);
    this.timer = null;
    this.id = null;
  }

  fail(text) {
    setText($('fleet-error'), text);
    show($('fleet-error'), true);
  }

  async run() {
    show($('fleet-error'), false);
    const selector = $('fleet-selector').value.trim();
    const tool = $('fleet-tool').value.trim();
    const timeout = $('fleet-timeout').value.trim();
    let args;
    try {
      args = parseArgs($('fleet-args').value);
    } catch (e) {
      this.fail(e.message);
      $('fleet-args').focus();
      return;
    }
    if (!selector || !tool) {
      this.fail('A selector and a tool are needed.');
      return;
    }
    const spec = {selector, tool, args};
    if (timeout) {
      const secs = Number(timeout);
      if (!Number.isFinite(secs) || secs < 0 || secs > 86400) {
        this.fail(`The timeout "${timeout}" must be a number of seconds from 0 to 86400.`);
        $('fleet-timeout').focus();
        return;
      }
      spec.timeout_ms = Math.round(secs * 1000);
    }
    this.stop();
    const button = $('fleet-run');
    button.disabled = true;
    try {
      const r = await this.api.fleetInvoke(spec);
      this.id = r.fleet_command_id;
      this.render({fleet_command_id: r.fleet_command_id, selector, tool, state: 'running',
        parts: (r.parts || []).map((p) => ({state: p.error ? 'error' : 'pending', ...p}))});
      this.poll();
    } catch (e) {
      this.fail(`The fleet command was refused: ${e.describe ? e.describe() : e.message}`);
    } finally {
      button.disabled = false;
    }
  }

  async poll() {
    const id = this.id;
    if (!id) return;
    try {
      const f = await this.api.fleetGet(id);
      if (this.id !== id) return;
      this.render(f);
      if (f.state === 'completed') {
        this.id = null;
        show($('fleet-cancel'), false);
        return;
      }
    } catch (e) {
      if (this.id !== id) return;
      this.onError(e, 'fleet command');
      if (e.status === 404 || e.status === 401) {
        this.stop();
        return;
      }
    }
    this.timer = setTimeout(() => this.poll(), POLL_MS);
  }

  async cancel() {
    const id = this.id;
    if (!id) return;
    try {
      await this.api.fleetCancel(id);
    } catch (e) {
      this.fail(`Cancel failed: ${e.describe ? e.describe() : e.message}`);
    }
  }

  render(f) {
    show($('fleet-result'), true);
    const parts = f.parts || [];
    const tally = {};
    for (const p of parts) {
      const [word] = partState(p);
      tally[word] = (tally[word] || 0) + 1;
    }
    const tallyText = Object.entries(tally).map(([word, n]) => `${n} ${word}`).join(', ');
    const done = f.state === 'completed';
    setText($('fleet-summary'), `Fleet command ${f.fleet_command_id}: ${f.tool} on ` +
        `${parts.length} node${parts.length === 1 ? '' : 's'} matching "${f.selector}" — ` +
        `${done ? 'completed' : 'running'}${tallyText ? ' (' + tallyText + ')' : ''}` +
        `${f.cancelled_at ? ', cancelled' : ''}.`);
    $('fleet-result').dataset.state = done ? 'completed' : 'running';
    show($('fleet-cancel'), !done);
    const rows = parts.map((p) => {
      const cell = (label, text, cls) => h('td', {dataset: {label}, class: cls, text});
      const [state, cls] = partState(p);
      const err = p.error ? [p.error.code, p.error.message].filter(Boolean).join(': ') : '';
      return h('tr', {dataset: {node: p.node_id, state: p.state || ''}},
          cell('Node', p.node_id),
          h('td', {dataset: {label: 'State'}},
              h('span', {class: `pstate pstate-${cls}`, text: state})),
          cell('Exit code', p.exit_code === null || p.exit_code === undefined ? '—' : String(p.exit_code)),
          cell('Duration', formatDuration(p.duration_ms)),
          cell('Error', err || '—', err ? 'error-text' : ''));
    });
    $('fleet-body').replaceChildren(...rows);
  }
}
