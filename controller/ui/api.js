// The operator REST API (wire.md §5) as the page uses it: every call carries the user token
// as `Authorization: Bearer`, answers are JSON, and a failure becomes an ApiError with the
// HTTP status and the body's {code, message} (or a network error, status 0).

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
  // "404 NOT_FOUND: no such node" / "network error: …".
  describe() {
    return this.status ? `${this.status} ${this.code}: ${this.message}` : this.message;
  }
}

export class Api {
  // token(): the current token; onUnauthorized(error): called on every 401.
  constructor(token, onUnauthorized) {
    this.token = token;
    this.onUnauthorized = onUnauthorized;
  }

  async call(method, path, body) {
    const headers = {Authorization: `Bearer ${this.token()}`, Accept: 'application/json'};
    const init = {method, headers, cache: 'no-store', credentials: 'omit'};
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, 'NETWORK', `network error: the controller did not answer (${e.message})`);
    }
    const text = await resp.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    if (!resp.ok) {
      const code = (data && data.code) || 'HTTP_' + resp.status;
      const message = (data && data.message) || text.slice(0, 200) || resp.statusText;
      const err = new ApiError(resp.status, code, message);
      if (resp.status === 401 && this.onUnauthorized) this.onUnauthorized(err);
      throw err;
    }
    return data;
  }

  nodes() { return this.call('GET', '/v1/edge/nodes'); }
  metrics(node, period) {
    return this.call('GET', `/v1/edge/nodes/${enc(node)}/metrics?period=${enc(period)}`);
  }
  config(node) { return this.call('GET', `/v1/edge/nodes/${enc(node)}/config`); }
  startSession(node, agentName, workspacePath) {
    const body = {agent_name: agentName};
    if (workspacePath) body.workspace_path = workspacePath;
    return this.call('POST', `/v1/edge/nodes/${enc(node)}/sessions`, body);
  }
  sessions() { return this.call('GET', '/v1/edge/sessions'); }
  ticket(session) { return this.call('POST', `/v1/edge/sessions/${enc(session)}/tickets`); }
  endSession(session) { return this.call('DELETE', `/v1/edge/sessions/${enc(session)}`); }
  fleetInvoke(spec) { return this.call('POST', '/v1/edge/fleet/commands', spec); }
  fleetGet(id) { return this.call('GET', `/v1/edge/fleet/commands/${enc(id)}`); }
  fleetCancel(id) { return this.call('POST', `/v1/edge/fleet/commands/${enc(id)}/cancel`); }
}

const enc = encodeURIComponent;
