import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

/*
 * The layer map of docs/architecture.md ("The layers") is ESLint's import-x/no-restricted-paths
 * (eslint.config.js), run by `npm run lint`. These cases lint a module that is not on disk as if
 * it were at the given path, so the zones are shown to refuse what they must and allow the rest.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const eslint = new ESLint({ cwd: ROOT });

async function layerErrors(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(ROOT, file) });
  return result.messages.filter((m) => m.ruleId === 'import-x/no-restricted-paths').map((m) => m.message);
}

describe('the layer rule', () => {
  it('refuses a plumbing module importing a feature, type-only included', async () => {
    expect(await layerErrors('src/http/probe.ts', "import type { AuthService } from '../auth/service.ts';\nexport type A = AuthService;\n"))
      .toHaveLength(1);
    expect(await layerErrors('src/db/probe.ts', "import { normalizeUsername } from '../validation/username.ts';\nexport const n = normalizeUsername;\n"))
      .toHaveLength(0);
  });

  it('refuses a feature importing a page, an admin module or the wiring', async () => {
    for (const from of ['../pages/csrf.ts', '../admin/panel-common.ts', '../deps.ts']) {
      expect(await layerErrors('src/webhooks/probe.ts', `import * as m from '${from}';\nexport const x = m;\n`)).toHaveLength(1);
    }
    expect(await layerErrors('src/webhooks/probe.ts', "import { actorOf } from '../auth/actor.ts';\nexport const a = actorOf;\n")).toHaveLength(0);
  });
});
