import { describe, expect, it } from 'vitest';
import { callbackWithToken, isUsableCallbackUrl } from '../../src/clients/callback.ts';

/** What the URL API writes: the reference for which parameters the result carries. */
const byUrlApi = (callback: string, token: string, state?: string) => {
  const url = new URL(callback);
  url.searchParams.set('token', token);
  if (state !== undefined) url.searchParams.set('state', state);
  return url.toString();
};

/** Everything a receiver reads from a URL: where it goes and its parameters in order. */
const reading = (url: string) => {
  const { origin, pathname, hash, searchParams } = new URL(url);
  return { origin, pathname, hash, params: [...searchParams] };
};

const JWT = 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ1c2VyX2lkIjoiNyJ9.c2lnbmF0dXJl-_x';

describe('callbackWithToken', () => {
  it('reads as URL.searchParams.set would have written it, whatever the callback looks like', () => {
    const callbacks = [
      'https://shop.example/sso/callback',
      'https://SHOP.example:443/sso/callback',
      'https://shop.example',
      'http://localhost:8080/cb',
      'https://shop.example/cb?',
      'https://shop.example/cb?next=%2Fhome&a=b+c',
      'https://shop.example/cb?a=%20b+c',
      'https://shop.example/cb?token=old',
      'https://shop.example/cb?a=1&token=old&b=2&%74oken=older',
      'https://shop.example/cb?state=old&x=1',
      'https://shop.example/cb?a=1&&b=2&',
      'https://shop.example/a b/ü?q=ü x',
      'https://xn--mnchen-3ya.example/cb',
      'https://münchen.example/cb',
      'https://shop.example/cb/../x/./y',
      'http://[::1]:3000/cb',
    ];
    const tokens = [JWT, 'a b&c=d+e', 'ünï', ''];
    for (const callback of callbacks) {
      for (const token of tokens) {
        expect(reading(callbackWithToken(callback, token)), `${callback} + ${token}`).toStrictEqual(reading(byUrlApi(callback, token)));
        // the second call is answered from the memo
        expect(reading(callbackWithToken(callback, token)), `${callback} + ${token}, again`).toStrictEqual(reading(byUrlApi(callback, token)));
      }
      expect(reading(callbackWithToken(callback, JWT, 'xyz 1+2')), `${callback} with state`).toStrictEqual(reading(byUrlApi(callback, JWT, 'xyz 1+2')));
    }
  });

  it('keeps the registered query byte for byte and adds token and state percent-encoded', () => {
    const cases: Array<[callback: string, state: string | undefined, expected: string]> = [
      ['https://shop.example/cb?a=%20b+c', undefined, `https://shop.example/cb?a=%20b+c&token=${JWT}`],
      ['https://shop.example/cb?a=%20b+c', 'xyz 1+2', `https://shop.example/cb?a=%20b+c&token=${JWT}&state=xyz%201%2B2`],
      ['https://shop.example/cb?next=%2fhome&x=%7E&y=a%2Bb', undefined, `https://shop.example/cb?next=%2fhome&x=%7E&y=a%2Bb&token=${JWT}`],
      ['https://SHOP.example:443/cb?A=1', undefined, `https://shop.example/cb?A=1&token=${JWT}`],
      ['https://shop.example/cb', 's', `https://shop.example/cb?token=${JWT}&state=s`],
      ['https://shop.example/cb?', undefined, `https://shop.example/cb?token=${JWT}`],
      ['https://shop.example/cb?a=1&', undefined, `https://shop.example/cb?a=1&token=${JWT}`],
      // a registered token takes the new value in place; any further one is dropped
      ['https://shop.example/cb?a=+1&token=old&b=2&%74oken=older', undefined, `https://shop.example/cb?a=+1&token=${JWT}&b=2`],
      // a registered state is kept unless the sign-in brings one, which then takes its place
      ['https://shop.example/cb?state=old&x=a+b', undefined, `https://shop.example/cb?state=old&x=a+b&token=${JWT}`],
      ['https://shop.example/cb?state=old&x=a+b', 'new', `https://shop.example/cb?state=new&x=a+b&token=${JWT}`],
      // what the URL parser itself escapes in a query (a space) it escapes once, when stored
      ['https://shop.example/cb?q=a b', undefined, `https://shop.example/cb?q=a%20b&token=${JWT}`],
    ];
    for (const [callback, state, expected] of cases) {
      expect(callbackWithToken(callback, JWT, state), `${callback} with state ${state}`).toBe(expected);
      expect(callbackWithToken(callback, JWT, state), `${callback} with state ${state}, again`).toBe(expected);
    }
    expect(callbackWithToken('https://shop.example/cb', 'a b&c=d+e/ü')).toBe('https://shop.example/cb?token=a%20b%26c%3Dd%2Be%2F%C3%BC');
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
