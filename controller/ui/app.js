// The fleet page's entry module: sign-in (a user token kept in this tab's sessionStorage),
// the 2-second refresh of the node and session lists, the error banner, and the wiring of
// the node detail, session view and fleet command panel. `#session=<id>` in the address opens
// that session (the "mirror" window), `#node=<id>` a node's detail.
import {h, $, setText, show, clockTime} from './dom.js';
import {Api} from './api.js';
import {NodeList, NodeDetail} from './nodes.js';
import {SessionView, SessionList} from './session.js';
import {FleetPanel} from './fleet.js';

const TOKEN_KEY = 'edge-fleet.token';
const POLL_MS = 2000;

let token = sessionStorage.getItem(TOKEN_KEY) || '';
let pollTimer = null;
let polling = false;
const failures = new Map();  // what failed ("node list", …) → the banner's line about it
let firstPoll = true;
let lastUpdated = '';

const api = new Api(() => token, (err) => signOut(`The controller refused the token (${err.describe()}). Sign in again.`));

// The error banner: one line per call that is failing now; a line goes when that call
// succeeds again (or on Dismiss, all of them).
function renderBanner() {
  $('banner-text').replaceChildren(...[...failures.values()].map((t) => h('p', {text: t})));
  show($('banner'), failures.size > 0);
}
function banner(text, source) {
  failures.set(source, text);
  renderBanner();
}
function clearBanner(source) {
  if (source) failures.delete(source);
  else failures.clear();
  renderBanner();
}
function reportError(err, what) {
  if (err.status === 401) return;  // signOut has run
  banner(`Could not load the ${what} at ${clockTime()}: ${err.describe ? err.describe() : err.message}`, what);
}

const nodeList = new NodeList({onOpen: (id) => openNode(id)});
const nodeDetail = new NodeDetail({
  api,
  onError: reportError,
  onSessionStarted: (r, nodeId, agentName) => {
    openSession({...r, node_id: nodeId, agent_name: agentName});
    refreshSoon();
  },
});
const sessionView = new SessionView({
  api,
  onConfigChanged: (nodeId) => nodeDetail.configChanged(nodeId),
  onClosed: () => refreshSoon(),
  onError: reportError,
});
const sessionList = new SessionList({
  onOpen: (s, mirror) => {
    if (mirror) {
      // Not "noopener": the new window gets a copy of this tab's session storage (the token).
      if (!window.open(`/ui/#session=${encodeURIComponent(s.session_id)}`, '_blank')) {
        banner('The browser blocked the new window.', 'window');
      }
    } else {
      openSession(s);
    }
  },
});
const fleet = new FleetPanel({api, onError: reportError});

function openNode(id) {
  nodeDetail.open(id, nodeList.nodes.get(id));
  if (location.hash !== `#node=${encodeURIComponent(id)}` && !sessionView.open) {
    history.replaceState(null, '', `#node=${encodeURIComponent(id)}`);
  }
}

function openSession(info) {
  const known = sessionList.sessions.get(info.session_id);
  sessionView.show(known ? {...known, ...info} : info);
  history.replaceState(null, '', `#session=${encodeURIComponent(info.session_id)}`);
}

// The token's claims for display only (the controller verifies it).
function claims(t) {
  try {
    const part = t.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(part + '='.repeat((4 - part.length % 4) % 4)));
  } catch {
    return null;
  }
}

function showSignedIn() {
  show($('signin'), false);
  show($('app'), true);
  show($('signout'), true);
  const c = claims(token);
  if (c && c.sub) {
    const exp = c.exp ? `, token expires ${new Date(c.exp * 1000).toISOString().replace('T', ' ').slice(0, 16)} UTC` : '';
    setText($('who'), `Signed in as ${c.sub}${c.tid ? ' (tenant ' + c.tid + ')' : ''}${exp}`);
    show($('who'), true);
  }
}

function showSignIn(message) {
  show($('app'), false);
  show($('signout'), false);
  show($('who'), false);
  show($('updated'), false);
  show($('signin'), true);
  const err = $('signin-error');
  setText(err, message || '');
  show(err, !!message);
  $('token').focus();
}

function signOut(message) {
  token = '';
  sessionStorage.removeItem(TOKEN_KEY);
  clearTimeout(pollTimer);
  pollTimer = null;
  firstPoll = true;
  lastUpdated = '';
  fleet.stop();
  if (sessionView.open) sessionView.close();
  nodeDetail.close();
  nodeList.update([]);
  sessionList.update([]);
  clearBanner();
  showSignIn(message);
}

async function tick() {
  if (!token || polling) return;
  polling = true;
  const started = Date.now();
  try {
    const body = await api.nodes();
    const nodes = (body && body.nodes) || [];
    nodeList.update(nodes);
    if (nodeDetail.nodeId) nodeDetail.update(nodeList.nodes.get(nodeDetail.nodeId));
    lastUpdated = clockTime();
    setText($('updated'), `Last updated ${lastUpdated}`);
    show($('updated'), true);
    clearBanner('node list');
  } catch (e) {
    reportError(e, 'node list');
    // What is shown is as of the last success: say so.
    if (lastUpdated) setText($('updated'), `Last updated ${lastUpdated} (refresh failing)`);
  }
  if (token) {
    try {
      const body = await api.sessions();
      const sessions = (body && body.sessions) || [];
      sessionList.update(sessions);
      for (const s of sessions) sessionView.learn(s);
      clearBanner('session list');
    } catch (e) {
      if (e.status === 404 || e.status === 405) {
        sessionList.unavailable(`Sessions are not available on this controller (${e.describe()}).`);
      } else {
        reportError(e, 'session list');
      }
    }
  }
  polling = false;
  if (firstPoll && token) {
    firstPoll = false;
    route();
  }
  if (token) pollTimer = setTimeout(tick, Math.max(0, POLL_MS - (Date.now() - started)));
}

function refreshSoon() {
  if (!token) return;
  clearTimeout(pollTimer);
  pollTimer = setTimeout(tick, 200);
}

function route() {
  const m = /^#(session|node)=(.+)$/.exec(location.hash);
  if (!m) return;
  const id = decodeURIComponent(m[2]);
  if (m[1] === 'session' && sessionView.sessionId !== id) openSession({session_id: id});
  if (m[1] === 'node' && nodeDetail.nodeId !== id) openNode(id);
}

$('signin-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const t = $('token').value.trim().replace(/^Bearer\s+/i, '');
  if (!/^[\x21-\x7e]+$/.test(t)) {
    showSignIn('The token must be one line of visible characters (paste it as printed).');
    return;
  }
  token = t;
  try {
    await api.nodes();
  } catch (err) {
    if (err.status === 401) return;  // signOut showed why
    token = '';
    showSignIn(`Could not reach the controller: ${err.describe()}`);
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  $('token').value = '';
  showSignedIn();
  tick();
});
$('signout').addEventListener('click', () => signOut());
$('banner-close').addEventListener('click', () => clearBanner());
window.addEventListener('hashchange', () => {
  if (token) route();
});

if (token) {
  showSignedIn();
  tick();
} else {
  showSignIn();
}
