import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * ESLint's import-x/no-cycle (npm run lint) does not follow type-only imports; this test does:
 * no module of src/ may reach itself again through any import or re-export, `import type`
 * included (docs/architecture.md, "The layers").
 */

const SRC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src');

function modules(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return modules(full);
    return /\.(ts|mjs)$/.test(e.name) ? [full] : [];
  });
}

/** The modules of src/ that `file` imports or re-exports from (relative specifiers only). */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specifiers = [...text.matchAll(/^\s*(?:import|export)\b[^'";]*?\bfrom\s+['"](\.{1,2}\/[^'"]+)['"]/gm)].map((m) => m[1]);
  return specifiers.map((s) => path.resolve(path.dirname(file), s));
}

/** Every cycle found by a depth-first walk, each as the chain of files from src/. */
function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (node: string) => {
    state.set(node, 'open');
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue;
      if (state.get(next) === 'open') found.push([...stack.slice(stack.indexOf(next)), next].map((f) => path.relative(SRC, f)));
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(node, 'done');
  };
  for (const node of graph.keys()) if (!state.has(node)) visit(node);
  return found;
}

describe('the module graph of src/', () => {
  it('has no import cycle, type-only imports included', () => {
    const graph = new Map(modules(SRC).map((f) => [f, importsOf(f)]));
    expect(graph.size).toBeGreaterThan(50);
    expect(cycles(graph).map((c) => c.join(' -> '))).toStrictEqual([]);
  });

  it('finds a cycle made only of type imports', () => {
    const a = path.join(SRC, 'a.ts');
    const b = path.join(SRC, 'b.ts');
    expect(cycles(new Map([[a, [b]], [b, [a]]]))).toStrictEqual([['a.ts', 'b.ts', 'a.ts']]);
  });
});
