import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { hiddenField } from '../pages/form-session.ts';
import { panelSession } from '../admin/support.ts';

describe('the panel\'s profile form for a user that does not exist', () => {
  let app: TestApp;
  beforeAll(async () => { app = await startTestApp(); });
  afterAll(() => app?.close());

  it('answers a documented 404 (the test client holds every answer to the API reference)', async () => {
    const admin = await makeUser(app, { role: 'admin' });
    const s = await panelSession(app, admin);
    const csrf = hiddenField((await s.get('/admin/users/new')).text, '_csrf');
    const r = await s.post('/admin/users/999999', { _csrf: csrf, email: 'a@b.example', role: 'user' });
    expect(r.status).toBe(404);
  });
});
