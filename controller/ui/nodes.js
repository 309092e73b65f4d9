// The node list (GET /v1/edge/nodes, refreshed by app.js) and one node's detail: metrics,
// config and the form that starts a session on it.
import {h, $, setText, show, formatTime, formatSeconds} from './dom.js';

// Status in words and a shape, colour only as a third cue (readable without colour).
const STATUS = {
  online: {symbol: '●', text: 'online'},
  busy: {symbol: '◐', text: 'busy'},
  offline: {symbol: '○', text: 'offline'},
};

export function statusBadge(status) {
  const s = STATUS[status] || {symbol: '?', text: String(status || 'unknown')};
  return h('span', {class: `status status-${STATUS[status] ? status : 'unknown'}`},
      h('span', {class: 'symbol', 'aria-hidden': 'true', text: s.symbol}), ' ',
      h('span', {class: 'word', text: s.text}));
}

function tagsText(tags) {
  if (!tags || typeof tags !== 'object') return '—';
  const parts = Object.entries(tags).map(([k, v]) => `${k}=${v}`);
  return parts.length ? parts.join(', ') : '—';
}

function versionsText(v) {
  if (!v) return '—';
  return `limits v${v.limits ?? '?'} · capabilities v${v.capabilities ?? '?'}`;
}

// The tools the executor always has (sandbox/tool_registry.cc). The node JSON's
// interactive_tools (an extension) names the tools a session may run; a controller without
// it leaves the form to guess from the node's own tool names.
const BUILTIN = new Set(['exec', 'sysinfo', 'file.read', 'file.write', 'file.list', 'file.stat',
  'file.delete', 'file.move', 'file.chmod', 'file.glob', 'file.search', 'session.start',
  'session.input', 'session.signal']);
const AGENTISH = /agent|chat|assist|bot|shell|repl|echo|interactive|claude|codex|llm/i;

export function guessAgent(tools, interactive) {
  if (interactive && interactive.length) return interactive[0];
  const own = (tools || []).filter((t) => !BUILTIN.has(t));
  return own.find((t) => AGENTISH.test(t)) || own[0] || '';
}

export class NodeList {
  constructor({onOpen}) {
    this.body = $('nodes-body');
    this.empty = $('nodes-empty');
    this.count = $('nodes-count');
    this.rows = new Map();  // node_id → {tr, cells}
    this.onOpen = onOpen;
    this.nodes = new Map();
  }

  update(nodes, now = Date.now()) {
    const seen = new Set();
    nodes.forEach((n, i) => {
      seen.add(n.node_id);
      this.nodes.set(n.node_id, n);
      let row = this.rows.get(n.node_id);
      if (!row) row = this.addRow(n.node_id);
      // Keep the server's order without recreating rows (focus stays where it is).
      if (this.body.children[i] !== row.tr) this.body.insertBefore(row.tr, this.body.children[i] || null);
      const c = row.cells;
      setText(c.device, n.device_name || n.node_id);
      if (row.status !== n.status) {
        c.status.replaceChildren(statusBadge(n.status));
        row.status = n.status;
        row.tr.dataset.status = n.status || '';
      }
      setText(c.seen, formatTime(n.last_seen, now));
      setText(c.tags, tagsText(n.tags));
      setText(c.tools, (n.capabilities || []).join(', ') || '—');
      setText(c.versions, versionsText(n.config_versions));
      setText(c.sessions, n.active_sessions_count ?? '—');
    });
    for (const [id, row] of this.rows) {
      if (!seen.has(id)) {
        row.tr.remove();
        this.rows.delete(id);
        this.nodes.delete(id);
      }
    }
    show(this.empty, nodes.length === 0);
    const online = nodes.filter((n) => n.status !== 'offline').length;
    setText(this.count, `${nodes.length} node${nodes.length === 1 ? '' : 's'}, ${online} not offline`);
  }

  addRow(id) {
    const cell = (label, ...kids) => h('td', {dataset: {label}}, ...kids);
    const open = h('button', {type: 'button', class: 'link', text: id,
      'aria-label': `Open node ${id}`, onclick: () => this.onOpen(id)});
    const cells = {
      node: cell('Node', open), device: cell('Device'), status: cell('Status'),
      seen: cell('Last seen'), tags: cell('Tags'), tools: cell('Tools', ),
      versions: cell('Config versions'), sessions: cell('Active sessions'),
    };
    cells.tools.classList.add('tools');
    const tr = h('tr', {dataset: {node: id}}, Object.values(cells));
    const row = {tr, cells, status: undefined};
    this.rows.set(id, row);
    return row;
  }
}

export class NodeDetail {
  // api: Api; onError(err, what); onSessionStarted(result, nodeId, agentName).
  constructor({api, onError, onSessionStarted}) {
    this.api = api;
    this.onError = onError;
    this.onSessionStarted = onSessionStarted;
    this.section = $('node');
    this.nodeId = null;
    $('node-close').addEventListener('click', () => this.close());
    $('metrics-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.loadMetrics();
    });
    $('metrics-period').addEventListener('change', () => this.loadMetrics());
    $('start-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.start();
    });
  }

  open(nodeId, node) {
    const changed = this.nodeId !== nodeId;
    this.nodeId = nodeId;
    show(this.section, true);
    if (changed) {
      $('agent-name').value = '';
      $('workspace').value = '';
      show($('start-error'), false);
      $('metrics').replaceChildren();
      $('config').replaceChildren();
    }
    this.update(node);
    this.loadMetrics();
    this.loadConfig();
    this.section.scrollIntoView({block: 'start'});
    $('node-h').focus({preventScroll: true});  // keyboard users continue in the detail
  }

  close() {
    this.nodeId = null;
    show(this.section, false);
  }

  // A fresh node JSON from the list's poll.
  update(node) {
    if (!node) {
      setText($('node-h'), `Node ${this.nodeId}`);
      $('node-status').replaceChildren('Not in the node list any more.');
      return;
    }
    const name = node.device_name && node.device_name !== node.node_id ? ` (${node.device_name})` : '';
    setText($('node-h'), `Node ${node.node_id}${name}`);
    $('node-status').replaceChildren('Status: ', statusBadge(node.status),
        ` · last seen ${formatTime(node.last_seen)}`);
    const tools = node.capabilities || [];
    const interactive = node.interactive_tools;
    const choices = interactive ?? tools.filter((t) => !BUILTIN.has(t));
    const list = $('agent-tools');
    const key = choices.join('\n');
    if (list.dataset.key !== key) {
      list.dataset.key = key;
      list.replaceChildren(...choices.map((t) => h('option', {value: t})));
    }
    const input = $('agent-name');
    if (!input.value && document.activeElement !== input) input.value = guessAgent(tools, interactive);
  }

  async loadMetrics() {
    const node = this.nodeId;
    if (!node) return;
    const period = $('metrics-period').value;
    const dl = $('metrics');
    try {
      const m = await this.api.metrics(node, period);
      if (node !== this.nodeId) return;
      const u = m.aggregated_usage || {};
      const hl = m.health || {};
      fillDl(dl, [
        ['Period', m.period || period],
        ['Input tokens', u.total_input_tokens],
        ['Output tokens', u.total_output_tokens],
        ['Estimated cost', u.estimated_cost],
        ['Tool invocations', u.total_tool_invocations],
        ['Uptime of the edge stream', formatSeconds(hl.uptime_seconds)],
        ['Last error', describeError(hl.last_error)],
      ]);
    } catch (e) {
      if (node !== this.nodeId) return;
      fillDl(dl, [['Metrics', `not available: ${e.describe ? e.describe() : e.message}`]]);
      if (e.status !== 404) this.onError(e, 'metrics');
    }
  }

  async loadConfig() {
    const node = this.nodeId;
    if (!node) return;
    const dl = $('config');
    try {
      const c = await this.api.config(node);
      if (node !== this.nodeId) return;
      const l = (c.limits && c.limits.limits) || {};
      const caps = c.capabilities || {};
      fillDl(dl, [
        ['Limits version', `v${c.limits?.config_version ?? '?'} since ${formatTime(c.limits?.effective_at)}`],
        ['Rate limit', l.rate_limit !== undefined ? `${l.rate_limit} control frames/s` : '—'],
        ['Max frame size', bytes(l.max_frame_size)],
        ['Reattach window', formatSeconds(l.reattach_window)],
        ['Max buffer size', bytes(l.max_buffer_size)],
        ['Buffer overflow policy', l.buffer_overflow_policy ?? '—'],
        ['Capabilities version', `v${caps.config_version ?? '?'} since ${formatTime(caps.effective_at)}`],
        ['Tools', (caps.capabilities || []).join(', ') || '—'],
      ]);
    } catch (e) {
      if (node !== this.nodeId) return;
      fillDl(dl, [['Config', `not available: ${e.describe ? e.describe() : e.message}`]]);
      this.onError(e, 'config');
    }
  }

  // node.config.changed arrived for `nodeId`: pull the config again (seeds/002 §9.4.4).
  configChanged(nodeId) {
    if (nodeId === this.nodeId) this.loadConfig();
  }

  async start() {
    const node = this.nodeId;
    const agent = $('agent-name').value.trim();
    const ws = $('workspace').value.trim();
    const err = $('start-error');
    show(err, false);
    if (!agent) {
      setText(err, 'Name the interactive tool to run.');
      show(err, true);
      return;
    }
    const button = $('start-form').querySelector('button[type=submit]');
    button.disabled = true;
    try {
      const r = await this.api.startSession(node, agent, ws);
      this.onSessionStarted(r, node, agent);
    } catch (e) {
      setText(err, `Could not start the session: ${e.describe ? e.describe() : e.message}`);
      show(err, true);
    } finally {
      button.disabled = false;
    }
  }
}

function fillDl(dl, pairs) {
  dl.replaceChildren(...pairs.flatMap(([k, v]) =>
    [h('dt', {text: k}), h('dd', {text: v === undefined || v === null || v === '' ? '—' : String(v)})]));
}

function bytes(n) {
  if (n === undefined || n === null) return '—';
  if (n >= 1 << 20 && n % (1 << 20) === 0) return `${n / (1 << 20)} MiB`;
  if (n >= 1024 && n % 1024 === 0) return `${n / 1024} KiB`;
  return `${n} bytes`;
}

function describeError(e) {
  if (!e) return 'none';
  if (typeof e === 'string') return e;
  if (typeof e === 'object') return [e.code, e.message, e.at || e.time].filter(Boolean).join(': ');
  return String(e);
}
