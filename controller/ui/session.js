// One session's live view over the WebSocket relay (wire.md §5.3), and the session list.
//
// The socket: GET /v1/edge/ws/stream?ticket=…&session_id=…[&last_seq=N] on this page's own
// origin (ws: or wss: like the page). Every numbered frame carries `seq`; the view remembers
// the highest it rendered and, when the socket drops, fetches a fresh ticket
// (POST /v1/edge/sessions/{id}/tickets) and reconnects with last_seq so the controller
// replays what was missed; a frame at or below last_seq is a duplicate and is skipped.
// Frames without seq (session.error about this socket's own frame, FRAMES_DROPPED,
// REPLAY_GAP) are shown as they come. A prompt is shown once the relay echoes it back (with
// seq, to every socket of the session), so two windows show the same stream; until then it
// is listed as waiting.
import {h, $, setText, show, uuid4, nowRfc3339, formatTime} from './dom.js';

const MAX_FRAMES = 2000;  // rendered frames kept; older ones are dropped from the page
const VERSION = 'rawp-dps-1.0';

export class SessionView {
  // api: Api; onConfigChanged(nodeId); onClosed(); onError(err, what).
  constructor({api, onConfigChanged, onClosed, onError}) {
    this.api = api;
    this.onConfigChanged = onConfigChanged;
    this.onClosed = onClosed;
    this.onError = onError;
    this.section = $('session');
    this.log = $('frames');
    this.reset();
    $('prompt-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.sendPrompt();
    });
    $('prompt').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.sendPrompt();
      }
    });
    $('session-interrupt').addEventListener('click', () => this.send('control.interrupt', {}));
    $('session-reconnect').addEventListener('click', () => this.reconnectNow());
    $('session-mirror').addEventListener('click', () => this.mirror());
    $('session-end').addEventListener('click', () => this.end());
    $('session-close').addEventListener('click', () => this.close());
  }

  reset() {
    this.sessionId = null;
    this.info = {};
    this.lastSeq = 0;
    this.ended = false;
    this.closedByUser = false;
    this.attempts = 0;
    this.now = false;  // the socket is being closed to reconnect at once
    this.pending = new Map();  // message_id → the "waiting" line
    this.mine = new Set();     // message_ids this window sent
    clearTimeout(this.timer);
    this.timer = null;
    if (this.ws) {
      this.ws.onclose = this.ws.onmessage = this.ws.onerror = this.ws.onopen = null;
      this.ws.close(1000, 'view closed');
    }
    this.ws = null;
  }

  get open() {
    return this.sessionId !== null;
  }

  // info: {session_id, edge_ws_ticket?, node_id?, agent_name?, status?, pinned_config_versions?}
  show(info) {
    this.reset();
    this.sessionId = info.session_id;
    this.info = info;
    this.log.replaceChildren();
    show(this.section, true);
    setText($('session-h'), `Session ${info.session_id}`);
    this.section.dataset.session = info.session_id;
    this.renderMeta();
    this.setControls(true);
    if (info.edge_ws_ticket) this.connect(info.edge_ws_ticket);
    else this.fetchTicketAndConnect();
    this.section.scrollIntoView({block: 'start'});
    $('prompt').focus({preventScroll: true});
  }

  // The session list knows more about the session (node, agent) than a ticket answer.
  learn(info) {
    if (!this.open || info.session_id !== this.sessionId) return;
    this.info = {...info, ...this.info, status: info.status};
    this.renderMeta();
  }

  renderMeta() {
    const i = this.info;
    const pins = i.pinned_config_versions;
    const parts = [];
    if (i.node_id) parts.push(`node ${i.node_id}`);
    if (i.agent_name) parts.push(`agent ${i.agent_name}`);
    if (i.status) parts.push(`status ${i.status}`);
    if (pins) parts.push(`pinned config: limits v${pins.limits}, capabilities v${pins.capabilities}`);
    parts.push(`last seq ${this.lastSeq}`);
    setText($('session-meta'), parts.join(' · '));
  }

  setConn(text, kind) {
    const el = $('session-conn');
    setText(el, text);
    el.className = `conn conn-${kind}`;
    this.section.dataset.conn = kind;
  }

  setControls(enabled) {
    for (const id of ['prompt', 'prompt-send', 'session-interrupt', 'session-end']) {
      $(id).disabled = !enabled;
    }
    $('session-reconnect').disabled = this.ended;
  }

  wsUrl(ticket) {
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const q = new URLSearchParams({ticket, session_id: this.sessionId});
    if (this.lastSeq > 0) q.set('last_seq', String(this.lastSeq));
    return `${scheme}//${location.host}/v1/edge/ws/stream?${q}`;
  }

  connect(ticket) {
    const id = this.sessionId;
    this.setConn(this.lastSeq ? `reconnecting from seq ${this.lastSeq}…` : 'connecting…', 'connecting');
    let ws;
    try {
      ws = new WebSocket(this.wsUrl(ticket));
    } catch (e) {
      this.note(`Could not open the socket: ${e.message}`, 'error');
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      if (this.sessionId !== id) return;
      this.attempts = 0;
      this.setConn('connected', 'connected');
    };
    ws.onmessage = (ev) => {
      if (this.sessionId !== id) return;
      if (typeof ev.data !== 'string') {
        this.note('A binary frame arrived and was ignored.', 'error');
        return;
      }
      let frame;
      try {
        frame = JSON.parse(ev.data);
      } catch {
        this.note(`An undecodable frame arrived: ${ev.data.slice(0, 200)}`, 'error');
        return;
      }
      this.handle(frame);
    };
    ws.onclose = (ev) => {
      if (this.sessionId !== id || this.ws !== ws) return;
      this.ws = null;
      if (this.ended) {
        this.setConn('ended', 'ended');
        return;
      }
      if (this.closedByUser) return;
      const why = ev.code === 1006 ? 'connection lost' : `closed ${ev.code}${ev.reason ? ' ' + ev.reason : ''}`;
      if (this.now) {
        this.now = false;
        this.fetchTicketAndConnect();
      } else {
        this.note(`The socket closed (${why}).`, 'warn');
        this.scheduleReconnect(why);
      }
    };
  }

  scheduleReconnect(why = '') {
    clearTimeout(this.timer);
    const delay = Math.min(1000 * 2 ** this.attempts, 15000);
    this.attempts++;
    this.setConn(`disconnected${why ? ' (' + why + ')' : ''}; reconnecting in ${Math.round(delay / 1000)} s`, 'disconnected');
    this.timer = setTimeout(() => this.fetchTicketAndConnect(), delay);
  }

  async fetchTicketAndConnect() {
    const id = this.sessionId;
    if (!id || this.ended) return;
    this.setConn('getting a ticket…', 'connecting');
    try {
      const t = await this.api.ticket(id);
      if (this.sessionId !== id) return;
      this.connect(t.edge_ws_ticket);
    } catch (e) {
      if (this.sessionId !== id) return;
      if (e.status === 404 || e.status === 410) {
        this.markEnded(`The session is gone (${e.describe()}).`);
      } else if (e.status === 401) {
        // app.js signs out.
      } else {
        this.note(`No new ticket: ${e.describe ? e.describe() : e.message}`, 'error');
        this.scheduleReconnect('no ticket');
      }
    }
  }

  reconnectNow() {
    if (!this.open || this.ended) return;
    clearTimeout(this.timer);
    this.attempts = 0;
    if (this.ws) {
      this.now = true;
      this.setConn('reconnecting…', 'connecting');
      this.ws.close(1000, 'reconnect');
    } else {
      this.fetchTicketAndConnect();
    }
  }

  handle(frame) {
    if (typeof frame.seq === 'number') {
      if (frame.seq <= this.lastSeq) return;  // replayed twice: already shown
      if (this.lastSeq && frame.seq > this.lastSeq + 1) {
        this.note(`Frames ${this.lastSeq + 1}–${frame.seq - 1} were not received.`, 'warn');
      }
      this.lastSeq = frame.seq;
    }
    const p = frame.payload || {};
    if (frame.message_id && this.pending.has(frame.message_id)) {
      this.pending.get(frame.message_id).remove();
      this.pending.delete(frame.message_id);
    }
    if (frame.type === 'session.error' && p.ref_message_id && this.pending.has(p.ref_message_id)) {
      this.pending.get(p.ref_message_id).remove();
      this.pending.delete(p.ref_message_id);
    }
    this.render(frame);
    this.renderMeta();
    if (frame.type === 'session.ended') this.markEnded();
    if (frame.type === 'node.config.changed' && p.node_id) this.onConfigChanged(p.node_id);
  }

  markEnded(text) {
    if (text) this.note(text, 'warn');
    this.ended = true;
    this.info.status = 'TERMINATED';
    clearTimeout(this.timer);
    this.setConn('ended', 'ended');
    this.setControls(false);
    for (const el of this.pending.values()) el.remove();
    this.pending.clear();
    if (this.ws) this.ws.close(1000, 'session ended');
  }

  // Renders one frame as a line of the log.
  render(frame) {
    const p = frame.payload || {};
    const type = String(frame.type || '?');
    let kind = 'other';
    let body;
    switch (type) {
      case 'agent.output': {
        const stream = p.stream || 'stdout';
        kind = stream === 'stderr' ? 'stderr' : 'output';
        body = h('pre', {}, stream === 'stderr' ? h('span', {class: 'tag', text: 'stderr: '}) : null,
            String(p.data ?? ''));
        break;
      }
      case 'agent.message':
        kind = 'message';
        body = typeof p.text === 'string' ? h('p', {class: 'text', text: p.text}) : json(p);
        break;
      case 'control.prompt.request': {
        kind = 'prompt';
        const who = this.mine.has(frame.message_id) ? 'this window' : 'another window';
        body = h('p', {class: 'text'}, h('span', {class: 'tag', text: `Prompt (from ${who}): `}),
            String(p.text ?? ''));
        break;
      }
      case 'session.error':
        kind = 'error';
        body = h('p', {class: 'text'}, h('strong', {text: `Error ${p.code || ''}: `}),
            String(p.message ?? ''), p.ref_message_id ? ` (about frame ${p.ref_message_id})` : '');
        break;
      case 'session.usage':
        kind = 'lifecycle';
        body = h('p', {class: 'text', text: `Usage: ${p.input_tokens ?? 0} input tokens, ` +
            `${p.output_tokens ?? 0} output tokens, estimated cost ${p.estimated_cost ?? 0}, ` +
            `${p.tool_invocations ?? 0} tool invocations.`});
        break;
      case 'session.started':
        kind = 'lifecycle';
        body = h('p', {class: 'text', text: 'Session started.'});
        break;
      case 'session.ended': {
        kind = 'lifecycle';
        const bits = [];
        if (p.exit_code !== undefined && p.exit_code !== null) bits.push(`exit code ${p.exit_code}`);
        if (p.outcome) bits.push(`outcome ${p.outcome}`);
        if (p.message) bits.push(p.message);
        body = h('p', {class: 'text', text: `Session ended${bits.length ? ': ' + bits.join(', ') : '.'}`});
        break;
      }
      case 'node.config.changed':
        kind = 'lifecycle';
        body = h('p', {class: 'text', text: `The node's ${p.changed_scope} config changed to ` +
            `version ${p.config_version}${p.reason ? ' (' + p.reason + ')' : ''}; this session ` +
            'keeps its pinned versions.'});
        break;
      default:
        body = json(p);
    }
    const seq = typeof frame.seq === 'number' ? `#${frame.seq}` : '—';
    const line = h('div', {class: `frame frame-${kind}`, dataset: {type, seq: frame.seq ?? ''}},
        h('span', {class: 'seq', title: typeof frame.seq === 'number' ? 'sequence number' :
            'not numbered: for this window only', text: seq}),
        h('span', {class: 'type', text: type}),
        h('div', {class: 'body'}, body));
    this.append(line);
  }

  // A line of the page's own (not a frame): reconnects, gaps, refusals.
  note(text, kind = 'info') {
    this.append(h('div', {class: `frame frame-note frame-${kind}`, dataset: {type: 'note'}},
        h('span', {class: 'seq', text: '·'}), h('span', {class: 'type', text: 'page'}),
        h('div', {class: 'body'}, h('p', {class: 'text', text}))));
  }

  append(el) {
    const log = this.log;
    const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    log.append(el);
    while (log.childElementCount > MAX_FRAMES) log.firstElementChild.remove();
    if (atBottom) log.scrollTop = log.scrollHeight;
  }

  send(type, payload) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) {
      this.note(`Not connected: ${type} was not sent.`, 'error');
      return null;
    }
    const frame = {v: VERSION, type, message_id: uuid4(), timestamp: nowRfc3339(),
      session_id: this.sessionId, payload};
    this.mine.add(frame.message_id);
    this.ws.send(JSON.stringify(frame));
    return frame;
  }

  sendPrompt() {
    const input = $('prompt');
    const text = input.value;
    if (!text.trim() || this.ended) return;
    const frame = this.send('control.prompt.request', {text});
    if (!frame) return;
    input.value = '';
    const waiting = h('div', {class: 'frame frame-pending', dataset: {type: 'pending'}},
        h('span', {class: 'seq', text: '…'}), h('span', {class: 'type', text: 'sending'}),
        h('div', {class: 'body'}, h('p', {class: 'text'},
            h('span', {class: 'tag', text: 'Prompt (waiting for the relay): '}), text)));
    this.pending.set(frame.message_id, waiting);
    this.append(waiting);
  }

  mirror() {
    if (!this.open) return;
    // Not "noopener": the new window gets a copy of this tab's session storage (the token).
    const w = window.open(`/ui/#session=${encodeURIComponent(this.sessionId)}`, '_blank');
    if (!w) this.note('The browser blocked the new window; open the session from the list there.', 'warn');
  }

  async end() {
    if (!this.open || this.ended) return;
    const id = this.sessionId;
    $('session-end').disabled = true;
    this.note('Ending the session…', 'info');
    try {
      await this.api.endSession(id);
    } catch (e) {
      if (this.sessionId !== id) return;
      if (e.status === 404 || e.status === 410) this.markEnded(`The session is gone (${e.describe()}).`);
      else {
        this.note(`Could not end the session: ${e.describe ? e.describe() : e.message}`, 'error');
        $('session-end').disabled = false;
      }
    }
  }

  close() {
    this.closedByUser = true;
    this.reset();
    show(this.section, false);
    delete this.section.dataset.session;
    if (location.hash.startsWith('#session=')) history.replaceState(null, '', '#');
    this.onClosed();
  }
}

function json(v) {
  return h('pre', {class: 'json', text: JSON.stringify(v, null, 2)});
}

export class SessionList {
  // onOpen(sessionJson, mirror: bool)
  constructor({onOpen}) {
    this.body = $('sessions-body');
    this.onOpen = onOpen;
    this.rows = new Map();
    this.sessions = new Map();
  }

  unavailable(text) {
    this.body.replaceChildren();
    this.rows.clear();
    setText($('sessions-empty'), text);
    show($('sessions-empty'), true);
    setText($('sessions-count'), '');
  }

  update(sessions, now = Date.now()) {
    const seen = new Set();
    sessions.forEach((s, i) => {
      seen.add(s.session_id);
      this.sessions.set(s.session_id, s);
      let row = this.rows.get(s.session_id);
      if (!row) row = this.addRow(s.session_id);
      if (this.body.children[i] !== row.tr) this.body.insertBefore(row.tr, this.body.children[i] || null);
      const c = row.cells;
      setText(c.node, s.node_id);
      setText(c.agent, s.agent_name);
      setText(c.status, s.status);
      row.tr.dataset.status = s.status || '';
      setText(c.created, formatTime(s.created_at, now));
      setText(c.activity, formatTime(s.last_activity_at, now));
    });
    for (const [id, row] of this.rows) {
      if (!seen.has(id)) {
        row.tr.remove();
        this.rows.delete(id);
        this.sessions.delete(id);
      }
    }
    setText($('sessions-empty'), 'No open sessions.');
    show($('sessions-empty'), sessions.length === 0);
    setText($('sessions-count'), `${sessions.length} open`);
  }

  addRow(id) {
    const cell = (label, ...kids) => h('td', {dataset: {label}}, ...kids);
    const get = () => this.sessions.get(id) || {session_id: id};
    const cells = {
      id: cell('Session', h('code', {class: 'id', text: id})),
      node: cell('Node'), agent: cell('Agent'), status: cell('Status'),
      created: cell('Created'), activity: cell('Last activity'),
      open: cell('Open',
          h('button', {type: 'button', text: 'Open', 'aria-label': `Open session ${id} here`,
            onclick: () => this.onOpen(get(), false)}),
          ' ',
          h('button', {type: 'button', text: 'New window',
            'aria-label': `Mirror session ${id} in a new window`,
            onclick: () => this.onOpen(get(), true)})),
    };
    const tr = h('tr', {dataset: {session: id}}, Object.values(cells));
    const row = {tr, cells};
    this.rows.set(id, row);
    return row;
  }
}
