// `npm run check:arrows`: fails on an import that runs against the layers of moss-ts (ARCHITECTURE.md):
//   cli → moss-modules → public API → server → agent → model → compiler → runtime → check/context/prompter/sandbox → module →
//   membrane → foundation → types/errors
// An import may point down or sideways within its layer, never up, and two folders of one layer may not import each
// other; across folders it goes through the folder's front door (`index.ts`, which names its exports: no
// `export *`); moss-modules/ may use only names the public API (engine/index.ts, container/index.ts) exports; the
// isolate half of the membrane (ISOLATE_BUNDLE) imports only itself, wire/, protocol.ts and visibility.ts, no package.
// It also counts the folder cycles of engine/ (folders and top-level files that reach each other through any import,
// type-only ones too: a cycle the layer rule's exceptions let through) and fails on one not in ALLOWED_CYCLES.
// Imports are read by TypeScript's parser (static, type-only, re-exports, `import()` and `require()` calls), not by a
// regular expression. Usage: node scripts/check-arrows.js [--root <dir>] [--json]
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ts } from "ts-morph";

/** The layers, lowest first: a file may import from its own layer or a lower one. */
export const LAYERS = [
  { name: "types/errors", members: ["engine/types.ts", "engine/errors.ts"] },
  {
    name: "foundation",
    members: [
      "container/",
      "engine/moss.ts",
      "engine/module-surface.ts",
      "engine/runnable-entry.ts",
      "engine/esbuild-service.ts",
      "engine/closest.ts",
      "engine/escape-reg-exp.ts",
      "engine/read-json-file.ts",
      "engine/private-temp-folder.ts",
      "engine/enable-code-cache.ts",
      "engine/property-access.ts",
      "engine/answers.ts",
      "engine/image-content.ts",
      "engine/fenced-code.ts",
      "engine/snippet-file.ts",
      "engine/render-diagnostics.ts",
      "engine/stop-reasons.ts",
      "engine/diagnostic-codes.ts",
      "engine/server-defaults.ts",
      "engine/format-value.ts",
    ],
  },
  { name: "membrane", members: ["engine/membrane/"] },
  { name: "module", members: ["engine/module/"] },
  {
    name: "check/context/prompter/sandbox",
    members: ["engine/check/", "engine/context/", "engine/prompter/", "engine/sandbox/"],
  },
  { name: "runtime", members: ["engine/runtime/"] },
  { name: "compiler", members: ["engine/compiler/"] },
  { name: "model", members: ["engine/model/"] },
  { name: "agent", members: ["engine/agent/"] },
  { name: "server", members: ["engine/server/"] },
  { name: "public API", members: ["engine/index.ts"] },
  { name: "moss-modules", members: ["moss-modules/"] },
  // The CLI is an application of the library and its bundled modules (`moss agent --working-directory` binds the
  // Files service); nothing imports it.
  { name: "cli", members: ["engine/cli/"] },
];

/**
 * The isolate half of the membrane is bundled into the one script that runs inside the isolate, beside model code
 * (engine/membrane/isolate-script.ts): a file of the bundle may import only other files of the bundle (isolate/,
 * wire/, protocol.ts, visibility.ts), and no package at all, not even a type.
 */
export const ISOLATE_BUNDLE = [
  "engine/membrane/isolate/",
  "engine/membrane/wire/",
  "engine/membrane/protocol.ts",
  "engine/membrane/visibility.ts",
];

/** The files whose exports are the public API; moss-modules/ may import only what these export. */
export const PUBLIC_DOORS = ["engine/index.ts", "container/index.ts"];

/**
 * Imports that break a rule today and stay allowed for now, each with its reason. `from` is a file or a folder
 * (ending in "/"), `to` one file or a list of files. An allowed import that no longer occurs is itself an error, so
 * the list only shrinks.
 */
export const ALLOWED = [
  // Upward imports.
  // Deep imports whose front door would load far more than the importer needs. Both files are light (no TypeScript, no
  // isolated-vm) and run before anything heavy: the spare type-check worker starts first so that TypeScript loads in
  // it while the command loads the module (the check room's door loads TypeScript itself), and the process-wide
  // sandbox drivers are prestarted by `moss run` and closed after every command (the runtime's door loads the
  // compiler's TypeScript, the sandbox's the drivers and the membrane).
  {
    from: "engine/cli/",
    to: ["engine/check/check-worker-start.ts", "engine/runtime/shared-sandbox.ts"],
    reason:
      "commands load only what they run (CLI start-up time is a measured goal); the check and runtime front doors load TypeScript",
  },
  // `moss serve` builds its model client before the server starts; the agent's front door would load the engine that
  // reads modules (TypeScript), which an idle server does not hold (engine/server/module-proof.ts). The client stays
  // in agent/: DESIGN.md names it the one file that imports openai.
  {
    from: "engine/cli/serve-command.ts",
    to: "engine/agent/openai-language-model.ts",
    reason: "an idle moss serve loads no TypeScript; the agent's front door loads it",
  },
  // moss-modules/ reaching past the public API: these names are not exported by engine/index.ts.
  {
    from: "moss-modules/mcp/output-validator.ts",
    to: "engine/runnable-entry.ts",
    reason: "the MCP output validator runs ajv in a worker built like the engine's own workers",
  },
  {
    from: "moss-modules/openapi/write-if-changed.ts",
    to: "engine/module/module-project.ts",
    reason: "generated declarations are checked with the same module program options as context modules",
  },
  {
    from: "moss-modules/redact-secrets.ts",
    to: "engine/membrane/host/secret-redactor.ts",
    reason:
      "the bindings and moss serve share the one secret redactor (moss serve redacts what tenants read with it); it is not public API",
  },
  {
    from: "moss-modules/openapi/plugin-manifest.ts",
    to: "engine/context/json-error-offset.ts",
    reason: "manifest JSON errors name line and column with the engine's JSON offset reader",
  },
];

/**
 * Folder cycles of engine/ that stay allowed for now, each `{ members, reason }` with members the folders (and
 * top-level files) of the cycle, in any order. An allowed cycle that no longer occurs is itself an error.
 */
export const ALLOWED_CYCLES = [];

/** ALLOWED as one `{ from, to, reason }` per allowed target. */
const ALLOWED_IMPORTS = ALLOWED.flatMap((rule) =>
  (Array.isArray(rule.to) ? rule.to : [rule.to]).map((to) => ({ from: rule.from, to, reason: rule.reason })),
);

const root = fileURLToPath(new URL("..", import.meta.url));
/** The folders whose code is held to the layers. */
const SCANNED = ["engine", "container", "moss-modules"];

/** Reads every relative (and self-referencing `moss-ts`) import of the scanned folders and returns the rule breaks. */
export function checkArrows(options = {}) {
  const base = options.root ?? root;
  const files = listFiles(base).map(toPosix);
  const sources = new Map(files.map((file) => [file, readFileSync(path.join(base, file), "utf8")]));
  const selfNames = packageSelfNames(base);
  const everyImport = files.flatMap((file) => readImports(base, file, sources.get(file), selfNames));
  const imports = everyImport.filter((entry) => entry.package === undefined);
  const publicNames = collectPublicNames(base, sources, selfNames);
  const used = new Set();
  const violations = [];
  for (const entry of everyImport) {
    const problem = bundleBreak(entry);
    if (problem !== undefined) violations.push({ ...entry, problem });
  }
  for (const entry of imports) {
    const problem = ruleBreak(base, entry, publicNames);
    if (problem === undefined) continue;
    const allowed = ALLOWED_IMPORTS.find(
      (rule) => matches(entry.from, rule.from) && matches(entry.to, rule.to),
    );
    if (allowed) {
      used.add(allowed);
      continue;
    }
    violations.push({ ...entry, problem });
  }
  violations.push(...peerCycles(imports));
  const stale = ALLOWED_IMPORTS.filter((rule) => !used.has(rule));
  const everyCycle = folderCycles(imports);
  const allowedCycle = (cycle) => ALLOWED_CYCLES.find((rule) => sameMembers(rule.members, cycle.members));
  const cycles = everyCycle.filter((cycle) => allowedCycle(cycle) === undefined);
  const staleCycles = ALLOWED_CYCLES.filter(
    (rule) => !everyCycle.some((cycle) => sameMembers(rule.members, cycle.members)),
  );
  return {
    files: files.length,
    imports: imports.length,
    violations,
    stale,
    folderCycles: everyCycle.length,
    cycles,
    staleCycles,
  };
}

/**
 * The folder cycles of engine/: the strongly connected groups (Tarjan) of the graph whose nodes are engine's folders
 * and top-level files and whose edges are every import between two of them, value or type-only. Each cycle is
 * `{ members, edges }`: its members sorted, and the first import of each edge inside it (`from:line → to`).
 */
function folderCycles(imports) {
  const edges = new Map();
  for (const entry of imports) {
    if (!entry.from.startsWith("engine/") || !entry.to.startsWith("engine/")) continue;
    const fromUnit = unitOf(entry.from);
    const toUnit = unitOf(entry.to);
    if (fromUnit === toUnit) continue;
    if (!edges.has(fromUnit)) edges.set(fromUnit, new Map());
    const targets = edges.get(fromUnit);
    if (!targets.has(toUnit)) targets.set(toUnit, entry);
  }
  const index = new Map();
  const lowest = new Map();
  const stack = [];
  const onStack = new Set();
  const groups = [];
  const visit = (unit) => {
    index.set(unit, index.size);
    lowest.set(unit, index.get(unit));
    stack.push(unit);
    onStack.add(unit);
    for (const next of edges.get(unit)?.keys() ?? []) {
      if (!index.has(next)) {
        visit(next);
        lowest.set(unit, Math.min(lowest.get(unit), lowest.get(next)));
      } else if (onStack.has(next)) {
        lowest.set(unit, Math.min(lowest.get(unit), index.get(next)));
      }
    }
    if (lowest.get(unit) !== index.get(unit)) return;
    const group = [];
    let member;
    do {
      member = stack.pop();
      onStack.delete(member);
      group.push(member);
    } while (member !== unit);
    if (group.length > 1) groups.push(group.sort());
  };
  for (const unit of [...edges.keys()].sort()) if (!index.has(unit)) visit(unit);
  return groups
    .sort((a, b) => a[0].localeCompare(b[0]))
    .map((members) => ({
      members,
      edges: members.flatMap((from) =>
        [...(edges.get(from) ?? [])]
          .filter(([to]) => members.includes(to))
          .map(([, entry]) => `${entry.from}:${entry.line} → ${entry.to}`),
      ),
    }));
}

function sameMembers(a, b) {
  return (
    a.length === b.length && [...a].sort().every((member, position) => member === [...b].sort()[position])
  );
}

/** Two folders of one layer that import each other: sideways imports are allowed, a cycle between peers is not. */
function peerCycles(imports) {
  const edges = new Map();
  for (const entry of imports) {
    const fromUnit = unitOf(entry.from);
    const toUnit = unitOf(entry.to);
    if (fromUnit === toUnit || layerOf(entry.from) !== layerOf(entry.to) || layerOf(entry.from) === undefined)
      continue;
    const key = `${fromUnit} ${toUnit}`;
    if (!edges.has(key)) edges.set(key, entry);
  }
  const cycles = [];
  for (const [key, entry] of edges) {
    const [fromUnit, toUnit] = key.split(" ");
    const back = edges.get(`${toUnit} ${fromUnit}`);
    if (back === undefined) continue;
    cycles.push({
      ...entry,
      problem: `${fromUnit} and ${toUnit} import each other (also ${back.from}:${back.line}): peers of one layer may not form a cycle`,
    });
  }
  return cycles;
}

/** The break of the isolate bundle's rule (see ISOLATE_BUNDLE), in words, or undefined. */
function bundleBreak(entry) {
  if (!ISOLATE_BUNDLE.some((member) => matches(entry.from, member))) return undefined;
  if (entry.package !== undefined) {
    return `the isolate half of the membrane may import no package (${entry.package}): it is bundled into the script that runs beside model code`;
  }
  if (ISOLATE_BUNDLE.some((member) => matches(entry.to, member))) return undefined;
  return `the isolate half of the membrane may import only engine/membrane/isolate/, wire/, protocol.ts and visibility.ts, not ${entry.to}`;
}

/** The rule an import breaks, in words, or undefined when it keeps every rule. */
function ruleBreak(base, entry, publicNames) {
  const { from, to } = entry;
  if (!existsSync(path.join(base, to))) return `imports ${to}, which does not exist`;
  if (entry.reExport && entry.names === undefined && path.posix.basename(from) === "index.ts") {
    return `front doors name their exports: replace \`export * from "${entry.specifier}"\` with the names`;
  }
  const fromUnit = unitOf(from);
  const toUnit = unitOf(to);
  if (fromUnit === toUnit) return undefined;
  const fromLayer = layerOf(from);
  const toLayer = layerOf(to);
  if (fromLayer === undefined) return `${from} is in no layer: add it to LAYERS in scripts/check-arrows.js`;
  if (toLayer === undefined) return `${to} is in no layer: add it to LAYERS in scripts/check-arrows.js`;
  if (LAYERS[fromLayer].name === "moss-modules") {
    if (to.startsWith("moss-modules/")) return undefined;
    if (PUBLIC_DOORS.includes(to)) return undefined;
    const exported = publicNames.get(to);
    const outside = entry.names === undefined ? ["*"] : entry.names.filter((name) => !exported?.has(name));
    if (outside.length === 0) return undefined;
    return `moss-modules may import only the public API (engine/index.ts, container/index.ts); ${outside.join(", ")} from ${to} is not in it`;
  }
  if (toLayer > fromLayer) {
    return `${LAYERS[fromLayer].name} may not import ${LAYERS[toLayer].name} (${to}): imports point down the layers`;
  }
  if (toUnit.endsWith("/") && to !== `${toUnit}index.ts`) {
    return `deep import of ${to}: import ${toUnit}index.ts, the folder's front door`;
  }
  return undefined;
}

/** The folder a file belongs to for the front-door rule ("engine/check/"), or the file itself at a folder's top. */
function unitOf(file) {
  const parts = file.split("/");
  if (parts[0] === "engine" || parts[0] === "moss-modules")
    return parts.length > 2 ? `${parts[0]}/${parts[1]}/` : file;
  return parts.length > 1 ? `${parts[0]}/` : file;
}

function layerOf(file) {
  const index = LAYERS.findIndex((layer) => layer.members.some((member) => matches(file, member)));
  return index === -1 ? undefined : index;
}

function matches(file, pattern) {
  return pattern.endsWith("/") ? file.startsWith(pattern) : file === pattern;
}

function listFiles(base) {
  const files = [];
  for (const folder of SCANNED) {
    const directory = path.join(base, folder);
    if (!existsSync(directory)) continue;
    for (const entry of readdirSync(directory, { recursive: true, withFileTypes: true })) {
      if (entry.isFile() && /\.(ts|js|mjs)$/.test(entry.name) && !entry.parentPath.includes("node_modules")) {
        files.push(path.relative(base, path.join(entry.parentPath, entry.name)));
      }
    }
  }
  return files.sort();
}

function toPosix(file) {
  return file.split(path.sep).join("/");
}

/** The package's own subpaths ("moss-ts", "moss-ts/mcp") mapped to their source files, from package.json exports. */
function packageSelfNames(base) {
  const manifest = JSON.parse(readFileSync(path.join(base, "package.json"), "utf8"));
  const names = new Map();
  for (const [subpath, target] of Object.entries(manifest.exports ?? {})) {
    const source = typeof target === "object" ? target["moss-ts-source"] : undefined;
    if (typeof source === "string")
      names.set(path.posix.join(manifest.name, subpath), path.posix.normalize(source));
  }
  return names;
}

/**
 * Every import of one file: `{ from, to, line, specifier, names, typeOnly, reExport }`, names undefined for `*`; an
 * import of a package other than moss-ts itself has `package` set and `to` undefined.
 */
function readImports(base, file, text, selfNames) {
  const kind = file.endsWith(".ts") ? ts.ScriptKind.TS : ts.ScriptKind.JS;
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, kind);
  const found = [];
  const add = (node, specifierNode, names, typeOnly, reExport = false) => {
    const specifier = specifierNode.text;
    const to = resolveSpecifier(base, file, specifier, selfNames);
    const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
    // A package: only the isolate bundle's rule reads these (`package` names it; `to` is undefined).
    if (to === undefined)
      found.push({ from: file, to, line, specifier, names, typeOnly, reExport, package: specifier });
    else found.push({ from: file, to, line, specifier, names, typeOnly, reExport });
  };
  const visit = (node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      add(
        node,
        node.moduleSpecifier,
        importedNames(node.importClause),
        node.importClause?.isTypeOnly === true,
      );
    } else if (
      ts.isExportDeclaration(node) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      const names =
        node.exportClause && ts.isNamedExports(node.exportClause)
          ? node.exportClause.elements.map((element) => (element.propertyName ?? element.name).text)
          : undefined;
      add(node, node.moduleSpecifier, names, node.isTypeOnly, true);
    } else if (
      ts.isCallExpression(node) &&
      (node.expression.kind === ts.SyntaxKind.ImportKeyword ||
        (ts.isIdentifier(node.expression) && node.expression.text === "require")) &&
      node.arguments.length === 1 &&
      ts.isStringLiteralLike(node.arguments[0])
    ) {
      add(node, node.arguments[0], undefined, false);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      const literal = node.argument.literal;
      if (ts.isStringLiteral(literal))
        add(node, literal, node.qualifier ? [leftmost(node.qualifier)] : undefined, true);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function leftmost(name) {
  return ts.isIdentifier(name) ? name.text : leftmost(name.left);
}

function importedNames(clause) {
  if (clause === undefined) return [];
  const names = [];
  if (clause.name) names.push("default");
  const bindings = clause.namedBindings;
  if (bindings && ts.isNamespaceImport(bindings)) return undefined;
  if (bindings && ts.isNamedImports(bindings)) {
    for (const element of bindings.elements) names.push((element.propertyName ?? element.name).text);
  }
  return names;
}

/** The repository-relative file an import names, or undefined for a package other than moss-ts itself. */
function resolveSpecifier(base, file, specifier, selfNames) {
  if (selfNames.has(specifier)) return selfNames.get(specifier);
  if (!specifier.startsWith(".")) return undefined;
  const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier));
  if (!target.endsWith(".js")) return target;
  // A compiled-style specifier ("./x.js") names the TypeScript source or declaration file beside it.
  const stem = target.slice(0, -".js".length);
  return (
    [`${stem}.ts`, `${stem}.d.ts`, target].find((candidate) => existsSync(path.join(base, candidate))) ??
    target
  );
}

/** For each file the public doors re-export from (following re-export chains), the names it lends the public API. */
function collectPublicNames(base, sources, selfNames) {
  const publicNames = new Map();
  const lend = (file, names) => {
    const text =
      sources.get(file) ??
      (existsSync(path.join(base, file)) ? readFileSync(path.join(base, file), "utf8") : "");
    for (const entry of readImports(base, file, text, selfNames)) {
      if (!entry.reExport || entry.package !== undefined) continue;
      const exported = entry.names ?? [];
      const lent = names === undefined ? exported : exported.filter((name) => names.has(name));
      if (lent.length === 0) continue;
      const known = publicNames.get(entry.to) ?? new Set();
      for (const name of lent) known.add(name);
      publicNames.set(entry.to, known);
      lend(entry.to, new Set(lent));
    }
  };
  for (const door of PUBLIC_DOORS) lend(door, undefined);
  return publicNames;
}

function main() {
  const argv = process.argv.slice(2);
  const rootIndex = argv.indexOf("--root");
  const base = rootIndex === -1 ? root : path.resolve(argv[rootIndex + 1] ?? ".");
  const result = checkArrows({ root: base });
  if (argv.includes("--json")) {
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  } else {
    for (const violation of result.violations) {
      process.stderr.write(`${violation.from}:${violation.line}: ${violation.problem}\n`);
    }
    for (const rule of result.stale) {
      process.stderr.write(
        `scripts/check-arrows.js: the allowed import ${rule.from} → ${rule.to} no longer occurs: delete its entry\n`,
      );
    }
    for (const cycle of result.cycles) {
      process.stderr.write(
        `folder cycle ${cycle.members.join(" ↔ ")}: ${cycle.edges.join(", ")}; break it, or list it in ALLOWED_CYCLES with its reason\n`,
      );
    }
    for (const rule of result.staleCycles) {
      process.stderr.write(
        `scripts/check-arrows.js: the allowed folder cycle ${rule.members.join(" ↔ ")} no longer occurs: delete its entry\n`,
      );
    }
    const failed = problemCount(result);
    process.stdout.write(
      failed === 0
        ? `check:arrows: ${result.imports} imports in ${result.files} files keep the layers (${ALLOWED_IMPORTS.length} allowed exceptions)\n`
        : `check:arrows: ${failed} problem(s)\n`,
    );
    process.stdout.write(
      `check:arrows: ${result.folderCycles} folder cycle(s) in engine/, type imports counted (${ALLOWED_CYCLES.length} allowed)\n`,
    );
  }
  process.exitCode = problemCount(result) === 0 ? 0 : 1;
}

function problemCount(result) {
  return result.violations.length + result.stale.length + result.cycles.length + result.staleCycles.length;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
