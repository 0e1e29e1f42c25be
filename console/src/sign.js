// The hub's request signature, as deploy/daqlib/hubclient.py's
// authorization() makes it (docs/RUNCONTROL.md "HTTP"):
//   Authorization: es-hmac <unix-ms> <nonce> <hex>
// hex = HMAC-SHA256 under the run key of "METHOD\nPATH\nUNIX-MS\nNONCE\nBODY",
// the nonce 32 lowercase hex digits drawn afresh for every request.
// Off a secure context (plain HTTP to a hub not on loopback) browsers offer
// no WebCrypto: then @noble/hashes, audited, from npm.
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';

export const KEY_MIN = 16;
export const KEY_MAX = 4096;

const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');

// The key's bytes as the daemons read a key file: its bytes without one
// trailing newline. Throws with the reason when no daemon would take it.
export function keyBytes(bytes) {
  let k = bytes;
  if (k.length > 0 && k[k.length - 1] === 0x0a) k = k.subarray(0, k.length - 1);
  if (k.length < KEY_MIN || k.length > KEY_MAX)
    throw new Error(`the key is ${k.length} bytes; a run key is ${KEY_MIN} to ${KEY_MAX} bytes`);
  return k;
}

export function nonce() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return hex(b);
}

async function proof(key, msg) {
  if (globalThis.crypto && crypto.subtle) {
    const k = await crypto.subtle.importKey('raw', key, { name: 'HMAC', hash: 'SHA-256' },
                                            false, ['sign']);
    return hex(new Uint8Array(await crypto.subtle.sign('HMAC', k, msg)));
  }
  return hex(hmac(sha256, key, msg));
}

// The Authorization header's value for one request; ms and n are given by
// tests only.
export async function authorization(key, method, path, body, ms = Date.now(), n = nonce()) {
  const enc = new TextEncoder();
  const head = enc.encode(`${method}\n${path}\n${ms}\n${n}\n`);
  const b = enc.encode(body);
  const msg = new Uint8Array(head.length + b.length);
  msg.set(head);
  msg.set(b, head.length);
  return `es-hmac ${ms} ${n} ${await proof(key, msg)}`;
}
