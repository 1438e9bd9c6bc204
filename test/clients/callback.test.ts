import { describe, expect, it } from 'vitest';
import { callbackWithToken, isUsableCallbackUrl } from '../../src/clients/callback.ts';

/** What the URL API writes: the reference the direct join must match. */
const byUrlApi = (callback: string, token: string, state?: string) => {
  const url = new URL(callback);
  url.searchParams.set('token', token);
  if (state !== undefined) url.searchParams.set('state', state);
  return url.toString();
};

const JWT = 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ1c2VyX2lkIjoiNyJ9.c2lnbmF0dXJl-_x';

describe('callbackWithToken', () => {
  it('writes what URL.searchParams.set writes, whatever the callback looks like', () => {
    const callbacks = [
      'https://shop.example/sso/callback',
      'https://SHOP.example:443/sso/callback',
      'https://shop.example',
      'http://localhost:8080/cb',
      'https://shop.example/cb?',
      'https://shop.example/cb?next=%2Fhome&a=b+c',
      'https://shop.example/cb?token=old',
      'https://shop.example/a b/ü',
      'https://xn--mnchen-3ya.example/cb',
      'https://münchen.example/cb',
      'https://shop.example/cb/../x/./y',
      'http://[::1]:3000/cb',
    ];
    const tokens = [JWT, 'a b&c=d', 'ünï', ''];
    for (const callback of callbacks) {
      for (const token of tokens) {
        expect(callbackWithToken(callback, token), `${callback} + ${token}`).toBe(byUrlApi(callback, token));
        // the second call is answered from the memo
        expect(callbackWithToken(callback, token), `${callback} + ${token}, again`).toBe(byUrlApi(callback, token));
      }
      expect(callbackWithToken(callback, JWT, 'xyz 1'), `${callback} with state`).toBe(byUrlApi(callback, JWT, 'xyz 1'));
    }
  });

  it('tells usable callbacks from the rest, the same on every call', () => {
    for (let i = 0; i < 2; i++) {
      expect(isUsableCallbackUrl('https://shop.example/cb')).toBe(true);
      expect(isUsableCallbackUrl('https://user:pw@shop.example/cb'), 'credentials').toBe(false);
      expect(isUsableCallbackUrl('https://shop.example/cb#frag'), 'fragment').toBe(false);
      expect(isUsableCallbackUrl('ftp://shop.example/cb'), 'scheme').toBe(false);
      expect(isUsableCallbackUrl('http://1.2.3.999/'), 'unparsable host').toBe(false);
      expect(isUsableCallbackUrl(42)).toBe(false);
    }
  });
});
