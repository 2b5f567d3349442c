import { access, readFile } from "node:fs/promises";
import { basename, dirname, join, relative, resolve } from "node:path";
import { isMap, isScalar, isSeq, LineCounter, type Node, parseDocument, type YAMLMap } from "yaml";
import { closest } from "../closest.ts";
import { MossError } from "../errors.ts";
import { SETTINGS, type Setting } from "./settings.ts";

/** The file `moss serve`, `moss worker` (and `--print-config`) read from the working directory when it exists. */
export const CONFIG_FILE = "moss.config.yaml";

/** What a value of the config is: its type and, for sections, the keys it may hold. */
type Shape =
  | { kind: "string" | "boolean" }
  | { kind: "integer"; min: number }
  | { kind: "strings" }
  | { kind: "section"; keys: Record<string, Shape> }
  | { kind: "map"; values: Shape }
  | { kind: "any" };

/** Every key `moss.config.yaml` may hold (an unknown key is a located error, with a "did you mean"). */
const SCHEMA: Shape = configSchema();

/**
 * The file's schema, made from the settings table: a section per first part of a setting's path, the settings
 * `perTenant` again under `limits.tenants.<tenant>`, and `modules`.
 */
function configSchema(): Shape {
  const root: Record<string, Shape> = {};
  const tenant: Record<string, Shape> = {};
  for (const entry of SETTINGS) {
    if (entry.inFile === false) continue;
    const keys = entry.path.split(".");
    let section = root;
    for (const key of keys.slice(0, -1)) {
      const inner = (section[key] ??= { kind: "section", keys: {} }) as { keys: Record<string, Shape> };
      section = inner.keys;
    }
    const shape = fileShape(entry);
    section[keys.at(-1)!] = shape;
    if (entry.perTenant) tenant[keys.at(-1)!] = shape;
  }
  (root.limits as { keys: Record<string, Shape> }).keys.tenants = {
    kind: "map",
    values: { kind: "section", keys: tenant },
  };
  // The outer file may set a module's `config` section and nothing else of the module's own (seed 000's rule),
  // and which host setup file binds its real services here (`host`, relative to this file): a deployment's choice.
  root.modules = {
    kind: "map",
    values: { kind: "section", keys: { config: { kind: "any" }, host: { kind: "string" } } },
  };
  return { kind: "section", keys: root };
}

/** What the file may hold for a setting (a level is any text here, as it always was; its flag checks it). */
function fileShape(entry: Setting): Shape {
  switch (entry.kind) {
    case "integer":
      return { kind: "integer", min: entry.min ?? 0 };
    case "off":
      return { kind: "boolean" };
    case "list":
      return { kind: "strings" };
    default:
      return { kind: "string" };
  }
}

/** A module's own file `<module>.config.yaml`: anything, with its `config` section of defaults. */
const MODULE_SCHEMA: Shape = { kind: "any" };

/** One configured value and where it came from (`moss.config.yaml:12:3`, `context.config.yaml:4:5`). */
export interface ConfigValue {
  value: unknown;
  source: string;
}

/** A loaded configuration: values by dotted path (`model.name`), each with its source. */
export class MossConfig {
  readonly #values = new Map<string, ConfigValue>();
  /** The module's `config` section after the outer file's overrides, each leaf with its source. */
  readonly #module = new Map<string, ConfigValue>();
  #hostSetup: ConfigValue | undefined;

  /** The value at a dotted path, or undefined. */
  get<T>(path: string): T | undefined {
    return this.#values.get(path)?.value as T | undefined;
  }

  /** The value at a dotted path with its source. */
  entry(path: string): ConfigValue | undefined {
    return this.#values.get(path);
  }

  /** Every value whose path starts with `prefix`, with its path. */
  entries(prefix: string): Array<[string, ConfigValue]> {
    return [...this.#values].filter(([path]) => path.startsWith(prefix));
  }

  /** The module's merged `config` section as a plain object. */
  moduleConfig(): Record<string, unknown> {
    const result: Record<string, unknown> = {};
    for (const [path, { value }] of this.#module) setPath(result, path.split("."), value);
    return result;
  }

  /** The module's merged `config` leaves with their sources. */
  moduleEntries(): Map<string, ConfigValue> {
    return new Map(this.#module);
  }

  /** The module's host setup file named by `modules.<module>.host` (an absolute path), with its source. */
  hostSetup(): ConfigValue | undefined {
    return this.#hostSetup;
  }

  /** @internal */
  setHostSetup(entry: ConfigValue): void {
    this.#hostSetup = entry;
  }

  /** @internal */
  set(path: string, entry: ConfigValue): void {
    this.#values.set(path, entry);
  }

  /** @internal */
  setModule(path: string, entry: ConfigValue): void {
    this.#module.set(path, entry);
  }
}

/**
 * Reads `moss.config.yaml` (`file`, else the working directory's when it exists) and the module's own
 * `<module>.config.yaml`; the module's `config` section gives defaults that the outer file's
 * `modules.<module>.config` overrides key by key. A bad file is a located MossError `config-invalid`
 * (`moss.config.yaml:12:3 - …`).
 */
export async function loadMossConfig(options: {
  cwd: string;
  file?: string;
  modulePath: string;
}): Promise<MossConfig> {
  const config = new MossConfig();
  const outerPath = resolve(options.cwd, options.file ?? CONFIG_FILE);
  const outer = await readYaml(outerPath, options.file !== undefined, options.cwd);
  const moduleFile = join(
    dirname(resolve(options.cwd, options.modulePath)),
    `${basename(options.modulePath).replace(/\.[cm]?tsx?$/, "")}.config.yaml`,
  );
  const own = await readYaml(moduleFile, false, options.cwd);
  if (own !== undefined) {
    checkFile(own.root, MODULE_SCHEMA, own);
    const section = own.root && isMap(own.root) ? own.root.get("config", true) : undefined;
    if (section !== undefined && section !== null) {
      if (!isMap(section))
        throw located(own, section as Node, "`config` must be a mapping of keys to values");
      leaves(section, "", own, (path, entry) => config.setModule(path, entry));
    }
  }
  if (outer !== undefined) {
    checkFile(outer.root, SCHEMA, outer);
    leaves(outer.root as YAMLMap | null, "", outer, (path, entry) => {
      if (!path.startsWith("modules.")) config.set(path, entry);
    });
    const modules =
      outer.root && isMap(outer.root) ? (outer.root.get("modules", true) as YAMLMap | undefined) : undefined;
    for (const item of modules?.items ?? []) {
      const key = String((item.key as { value?: unknown })?.value ?? item.key);
      const host = isMap(item.value) ? (item.value.get("host", true) as Node | undefined) : undefined;
      const hostFile = host === undefined ? undefined : await hostSetupFile(outer, outerPath, key, host);
      if (resolve(dirname(outerPath), key) !== resolve(options.cwd, options.modulePath)) continue;
      if (hostFile !== undefined) config.setHostSetup({ value: hostFile, source: where(outer, host) });
      const section = isMap(item.value) ? item.value.get("config", true) : undefined;
      if (section !== undefined && section !== null) {
        if (!isMap(section))
          throw located(outer, section as Node, "a module's `config` must be a mapping of keys to values");
        leaves(section, "", outer, (path, entry) => config.setModule(path, entry));
      }
    }
  }
  return config;
}

/** A module's `host` setup file, resolved relative to the config file; one that is not there is a located error. */
async function hostSetupFile(
  file: YamlFile,
  configPath: string,
  module: string,
  node: Node,
): Promise<string> {
  const named = String((node as { value?: unknown }).value);
  const absolute = resolve(dirname(configPath), named);
  try {
    await access(absolute);
  } catch {
    throw located(
      file,
      node,
      `\`modules.${module}.host\`: no host setup file at ${absolute} (a path relative to ${basename(configPath)})`,
    );
  }
  return absolute;
}

/**
 * `--print-config`: every setting with its value in effect and where it came from, one per line; a setting nothing
 * sets (no flag, variable, file or default of its own) says so, rather than being left out.
 */
export function renderConfig(
  rows: Array<[path: string, entry: ConfigValue | undefined, otherwise?: string]>,
): string {
  const width = Math.max(0, ...rows.map(([path]) => path.length));
  return rows
    .map(([path, entry, otherwise]) =>
      entry === undefined
        ? `${path.padEnd(width)}  (not set)  # ${otherwise === undefined ? "nothing sets it" : `otherwise ${otherwise}`}`
        : `${path.padEnd(width)}  ${JSON.stringify(entry.value)}  # ${entry.source}`,
    )
    .join("\n");
}

interface YamlFile {
  display: string;
  root: Node | null;
  lines: LineCounter;
}

async function readYaml(path: string, required: boolean, cwd: string): Promise<YamlFile | undefined> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT" && !required) return undefined;
    throw new MossError(
      "config-invalid",
      `${path}: cannot read the config file (${(error as Error).message}).`,
      {
        file: path,
      },
    );
  }
  const display = relative(cwd, path) || path;
  const lines = new LineCounter();
  const document = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  const problems = document.errors.map((error) => {
    const position = error.linePos?.[0] ?? { line: 1, col: 1 };
    return new MossError(
      "config-invalid",
      `${display}:${position.line}:${position.col} - ${error.message.split("\n")[0]}`,
      { file: display, line: position.line, column: position.col },
    );
  });
  const invalid = everyProblem(display, problems);
  if (invalid !== undefined) throw invalid;
  return { display, root: document.contents as Node | null, lines };
}

function located(file: YamlFile, node: Node | undefined, message: string): MossError {
  const offset = node?.range?.[0] ?? 0;
  const { line, col } = file.lines.linePos(offset);
  return new MossError("config-invalid", `${file.display}:${line}:${col} - ${message}`, {
    file: file.display,
    line,
    column: col,
  });
}

function where(file: YamlFile, node: Node | undefined): string {
  const { line, col } = file.lines.linePos(node?.range?.[0] ?? 0);
  return `${file.display}:${line}:${col}`;
}

/**
 * One error for a file's problems: the only one as it is, or each located on a line of its own (in file order)
 * under a count, with the first's location in `details` and every one's in `details.problems`. A file with three
 * typos is mended in one pass, not three.
 */
function everyProblem(display: string, problems: MossError[]): MossError | undefined {
  if (problems.length <= 1) return problems[0];
  const first = problems[0]!;
  return new MossError(
    "config-invalid",
    `${problems.map((problem) => problem.message).join("\n")}\n${display}: ${problems.length} problems`,
    {
      ...first.details,
      problems: problems.map((problem) => ({ ...problem.details, message: problem.message })),
    },
  );
}

/** Checks a file's contents against its shape: throws one located error naming every problem (see everyProblem). */
function checkFile(node: Node | null, shape: Shape, file: YamlFile): void {
  const problems: MossError[] = [];
  check(node, shape, file, "", problems);
  const invalid = everyProblem(file.display, problems);
  if (invalid !== undefined) throw invalid;
}

/** Checks a node against its shape, adding a located error for each problem (a node in error is not looked into). */
function check(node: Node | null, shape: Shape, file: YamlFile, path: string, problems: MossError[]): void {
  if (shape.kind === "any" || node === null) return;
  const name = path === "" ? "the file" : `\`${path}\``;
  if (shape.kind === "section" || shape.kind === "map") {
    if (!isMap(node)) {
      problems.push(located(file, node, `${name} must be a mapping`));
      return;
    }
    for (const item of node.items) {
      const keyNode = item.key as Node;
      const key = String(isScalar(keyNode) ? keyNode.value : keyNode);
      const inner = path === "" ? key : `${path}.${key}`;
      if (shape.kind === "section") {
        const expected = shape.keys[key];
        if (expected === undefined) {
          const suggestion = closest(key, Object.keys(shape.keys));
          const known = Object.keys(shape.keys).join(", ");
          problems.push(
            located(
              file,
              keyNode,
              path.startsWith("modules.") && key !== "config"
                ? `only a module's \`config\` section and its \`host\` setup file can be set here (found \`${key}\`); the rest belongs to the module's own file`
                : `unknown key \`${inner}\`${suggestion ? ` — did you mean \`${suggestion}\`?` : ""} (known: ${known})`,
            ),
          );
          continue;
        }
        check(item.value as Node | null, expected, file, inner, problems);
      } else {
        check(item.value as Node | null, shape.values, file, inner, problems);
      }
    }
    return;
  }
  if (shape.kind === "strings") {
    if (!isSeq(node) || node.items.some((item) => !isScalar(item) || typeof item.value !== "string")) {
      problems.push(located(file, node, `${name} must be a list of strings`));
    }
    return;
  }
  const value = isScalar(node) ? node.value : undefined;
  if (shape.kind === "integer") {
    if (typeof value !== "number" || !Number.isInteger(value) || value < shape.min) {
      problems.push(
        located(
          file,
          node,
          `${name} must be an integer of at least ${shape.min}, got ${JSON.stringify(value ?? String(node))}`,
        ),
      );
    }
  } else if (typeof value !== shape.kind) {
    problems.push(
      located(file, node, `${name} must be a ${shape.kind}, got ${JSON.stringify(value ?? String(node))}`),
    );
  }
}

/** Calls `visit` for every leaf (scalar or list) under `node`, with its dotted path and source. */
function leaves(
  node: YAMLMap | null,
  prefix: string,
  file: YamlFile,
  visit: (path: string, entry: ConfigValue) => void,
): void {
  for (const item of node?.items ?? []) {
    const keyNode = item.key as Node;
    const key = String(isScalar(keyNode) ? keyNode.value : keyNode);
    const path = prefix === "" ? key : `${prefix}.${key}`;
    const value = item.value as Node | null;
    if (value !== null && isMap(value)) leaves(value, path, file, visit);
    else
      visit(path, {
        value: value === null ? null : (value as { toJSON(): unknown }).toJSON(),
        source: where(file, value ?? keyNode),
      });
  }
}

function setPath(target: Record<string, unknown>, path: string[], value: unknown): void {
  let node = target;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    node = (typeof next === "object" && next !== null ? next : (node[key] = {})) as Record<string, unknown>;
  }
  node[path.at(-1)!] = value;
}
