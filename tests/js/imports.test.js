// The page's ES modules import one another without a cycle: a cycle makes a module's names undefined
// while its partner is still evaluating, depending on which module the browser reached first.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { parse } from "espree";

const PAGE = resolve(dirname(fileURLToPath(import.meta.url)), "../../static/js");

// Each module of `folder` → the modules of the same folder it imports (static imports and re-exports).
function importGraph(folder) {
  const graph = new Map();
  for (const name of readdirSync(folder).filter((file) => file.endsWith(".js")).sort()) {
    const program = parse(readFileSync(join(folder, name), "utf8"), { ecmaVersion: "latest", sourceType: "module" });
    const targets = program.body
      .filter((node) => node.source && /^(Import|ExportNamed|ExportAll)Declaration$/.test(node.type))
      .map((node) => resolve(folder, node.source.value))
      .filter((path) => dirname(path) === folder)
      .map((path) => path.slice(folder.length + 1));
    graph.set(name, targets);
  }
  return graph;
}

// The first cycle found, as the modules along it with the first repeated at the end; null if none.
function firstCycle(graph) {
  const done = new Set();
  const path = [];
  const visit = (name) => {
    const onPath = path.indexOf(name);
    if (onPath >= 0) return [...path.slice(onPath), name];
    if (done.has(name)) return null;
    path.push(name);
    for (const target of graph.get(name) || []) {
      const cycle = visit(target);
      if (cycle) return cycle;
    }
    path.pop();
    done.add(name);
    return null;
  };
  for (const name of graph.keys()) {
    const cycle = visit(name);
    if (cycle) return cycle;
  }
  return null;
}

test("the page's modules import one another without a cycle", () => {
  const graph = importGraph(PAGE);
  assert.ok(graph.get("app.js").length > 10, "the page's imports are read");
  assert.equal(firstCycle(graph)?.join(" -> ") ?? null, null);
});

test("a cycle through an import or a re-export is found, with the modules along it", () => {
  const folder = mkdtempSync(join(tmpdir(), "page-imports-"));
  try {
    writeFileSync(join(folder, "a.js"), 'import { b } from "./b.js";\nexport const a = () => b;\n');
    writeFileSync(join(folder, "b.js"), 'export { c as b } from "./c.js";\n');
    writeFileSync(join(folder, "c.js"), 'import { a } from "./a.js";\nexport const c = () => a;\n');
    writeFileSync(join(folder, "d.js"), 'import { a } from "./a.js";\nimport "node:fs";\nexport const d = a;\n');
    assert.deepEqual(firstCycle(importGraph(folder)), ["a.js", "b.js", "c.js", "a.js"]);
    writeFileSync(join(folder, "c.js"), "export const c = 1;\n");
    assert.equal(firstCycle(importGraph(folder)), null);
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
});
