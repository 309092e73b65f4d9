// Small DOM and formatting helpers shared by the page's modules. Everything that reaches the
// page from the network is set as text (textContent), never parsed as HTML.

// h('td', {class: 'x', dataset: {label: 'Node'}}, child, 'text', ...) → an element.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'text') el.textContent = v;
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export const $ = (id) => document.getElementById(id);

// Sets an element's text only when it changed (keeps screen readers and selection calm).
export function setText(el, text) {
  const t = text === undefined || text === null ? '' : String(text);
  if (el.textContent !== t) el.textContent = t;
}

export function show(el, visible) {
  el.hidden = !visible;
}

// A UUIDv4: crypto.randomUUID where the page is a secure context (https, localhost), else
// built from crypto.getRandomValues (plain http to a controller on another host).
export function uuid4() {
  if (globalThis.crypto && typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const x = [...b].map((v) => v.toString(16).padStart(2, '0')).join('');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

// RFC 3339 UTC with milliseconds ("2026-11-25T01:02:03.456Z").
export const nowRfc3339 = () => new Date().toISOString();

// "2026-11-25 01:02:03 UTC (5 s ago)" for an RFC 3339 time; the text itself when unparsable.
export function formatTime(rfc3339, now = Date.now()) {
  if (!rfc3339) return '—';
  const t = Date.parse(rfc3339);
  if (Number.isNaN(t)) return String(rfc3339);
  const abs = new Date(t).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  return `${abs} (${formatAgo(now - t)})`;
}

export function formatAgo(ms) {
  if (ms < 0) ms = 0;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s ago`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ago`;
  const hrs = Math.floor(m / 60);
  if (hrs < 48) return `${hrs} h ago`;
  return `${Math.floor(hrs / 24)} days ago`;
}

// 1234 → "1.2 s", 95000 → "1 min 35 s"; "—" for null.
export function formatDuration(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

export function formatSeconds(secs) {
  if (secs === null || secs === undefined) return '—';
  return formatDuration(Number(secs) * 1000);
}

// Local clock time "01:02:03" for the "last updated" line.
export const clockTime = (d = new Date()) => d.toTimeString().slice(0, 8);
