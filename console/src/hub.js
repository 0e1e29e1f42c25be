// Requests to the hub that served this page (same origin only: the page
// makes no request anywhere else). Every request is signed when a key is
// held; the hub's JSON answer comes back as it is, refusals included.
import { authorization } from './sign.js';

export class Hub {
  constructor() {
    this.key = null;
  }

  // The hub's answer to one signed request: the fetch Response, or an
  // Error when the hub cannot be reached.
  async send(method, path, body) {
    const headers = {};
    if (method === 'POST') headers['Content-Type'] = 'application/json';
    if (this.key) headers.Authorization = await authorization(this.key, method, path, body);
    try {
      return await fetch(path, { method, headers, body: method === 'POST' ? body : undefined,
                                 cache: 'no-store', credentials: 'omit' });
    } catch (e) {
      return new Error(`the hub cannot be reached: ${e.message}`);
    }
  }

  async request(method, path, doc) {
    const r = await this.send(method, path, doc === undefined ? '' : JSON.stringify(doc));
    if (r instanceof Error) return { status: 0, answer: { error: r.message } };
    let answer;
    try {
      answer = await r.json();
    } catch {
      answer = { error: `the hub answered ${path} with no JSON (HTTP ${r.status})` };
    }
    return { status: r.status, answer };
  }

  // A file the hub serves signed (a run's report.html), as a Blob; a
  // refusal's reason as error.
  async file(path) {
    const r = await this.send('GET', path, '');
    if (r instanceof Error) return { status: 0, error: r.message };
    if (r.status !== 200) {
      let error = `HTTP ${r.status}`;
      try {
        error = (await r.json()).error || error;
      } catch { /* no JSON: the status says it */ }
      return { status: r.status, error };
    }
    return { status: 200, blob: await r.blob() };
  }

  state() { return this.request('GET', '/state'); }

  post(path, doc) { return this.request('POST', path, doc); }
}

// The reason of a refusal, word for word as the hub gave it.
export function reasonOf(answer, status) {
  return answer.reason || answer.error || `HTTP ${status}`;
}
