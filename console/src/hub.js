// Requests to the hub that served this page (same origin only: the page
// makes no request anywhere else). Every request is signed when a key is
// held; the hub's JSON answer comes back as it is, refusals included.
import { authorization } from './sign.js';

export class Hub {
  constructor() {
    this.key = null;
  }

  async request(method, path, doc) {
    const body = doc === undefined ? '' : JSON.stringify(doc);
    const headers = {};
    if (method === 'POST') headers['Content-Type'] = 'application/json';
    if (this.key) headers.Authorization = await authorization(this.key, method, path, body);
    let r;
    try {
      r = await fetch(path, { method, headers, body: method === 'POST' ? body : undefined,
                              cache: 'no-store', credentials: 'omit' });
    } catch (e) {
      return { status: 0, answer: { error: `the hub cannot be reached: ${e.message}` } };
    }
    let answer;
    try {
      answer = await r.json();
    } catch {
      answer = { error: `the hub answered ${path} with no JSON (HTTP ${r.status})` };
    }
    return { status: r.status, answer };
  }

  state() { return this.request('GET', '/state'); }

  post(path, doc) { return this.request('POST', path, doc); }
}

// The reason of a refusal, word for word as the hub gave it.
export function reasonOf(answer, status) {
  return answer.reason || answer.error || `HTTP ${status}`;
}
