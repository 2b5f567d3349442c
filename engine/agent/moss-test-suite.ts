import { readFile } from "node:fs/promises";
import { ts } from "ts-morph";
import type { Container, Token } from "../../container/index.ts";
import type { MossCompilerOptions } from "../compiler/moss-compiler.ts";
import { locatedMessage, MossError } from "../errors.ts";
import type { MossRuntime } from "../runtime/moss-runtime.ts";
import type { Execution, MossContext } from "../types.ts";
import { compileModuleRuntime } from "./module-runtime.ts";

/**
 * One entry of a module's `__moss_test_cases__`: a target name (a function declared in the module, usually in a
 * `// <moss-hide>` region), or an object. With `code`, the code runs and `target` (default `main`) is called;
 * without `code`, the source of the module's function `target` is run as the model's code would be.
 */
export type MossTestCaseSpec = string | { name?: string; target?: string; code?: string };

/** A test case after defaults are applied. */
export interface MossTestCase {
  name: string;
  target: string;
  code: string;
}

/** The outcome of one test case. */
export interface MossTestCaseResult {
  name: string;
  target: string;
  ok: boolean;
  /** Undefined when the runtime could not be built (see `error`). */
  execution?: Execution;
  /** A compile failure (a MossError) that kept the case from running. */
  error?: unknown;
}

/** The outcome of `runModuleTests`. */
export interface MossModuleTestReport {
  module: string;
  ok: boolean;
  passed: number;
  failed: number;
  results: MossTestCaseResult[];
}

/** Options of one `run`. */
export interface MossTestRunOptions {
  /** The function to call. Default `main`. */
  target?: string;
  /** The code to run; default: the source of the module's own function `target`. */
  code?: string;
  /** Token/value bindings (fakes) made before compile; they win over the host setup's bindings. */
  inject?: Iterable<readonly [Token, unknown]>;
  /** A saved session to continue. */
  context?: MossContext;
  /** Extra copied arguments after `moss`. */
  args?: unknown[];
}

/** Options of a {@link MossTestSuite}. */
export interface MossTestSuiteOptions {
  container?: Container;
  /** Passed to every compiler; default sandbox `in-process` (tests need no crash containment). */
  compiler?: Omit<MossCompilerOptions, "container">;
  /** Run the module's `<name>.host.ts` setup before compile. Default true. */
  hostSetup?: boolean;
}

const TEST_CASES_EXPORT = "__moss_test_cases__";

/**
 * Tests for context modules (after GhostOS's MossTestSuit): render a module's prompt, run code or one of the
 * module's functions in a fresh runtime with fakes injected, and run the module's own `__moss_test_cases__`,
 * each in its own runtime. Usable from vitest and from `moss test`.
 */
export class MossTestSuite {
  readonly #options: MossTestSuiteOptions;

  constructor(options: MossTestSuiteOptions = {}) {
    this.#options = options;
  }

  /** The prompt a model reads for the module. */
  async dumpPrompt(modulePath: string, options: Pick<MossTestRunOptions, "inject"> = {}): Promise<string> {
    return this.#withRuntime(modulePath, options, (runtime) => runtime.prompter().dumpModulePrompt());
  }

  /** Runs code (or the module's own function `target`) in a fresh runtime and returns the execution. */
  async run(modulePath: string, options: MossTestRunOptions = {}): Promise<Execution> {
    const target = options.target ?? "main";
    const code = options.code ?? (await functionSource(modulePath, target));
    return this.#withRuntime(modulePath, options, (runtime) =>
      runtime.execute({ code, target, ...(options.args === undefined ? {} : { args: options.args }) }),
    );
  }

  /** The module's test cases, read statically from its `__moss_test_cases__` export (an array literal). */
  async testCases(modulePath: string): Promise<MossTestCase[]> {
    const source = await readSource(modulePath);
    const specs = staticTestCases(modulePath, source);
    return specs.map((spec) => {
      const entry = typeof spec === "string" ? { target: spec } : spec;
      const target = entry.target ?? (entry.code === undefined ? entry.name : undefined) ?? "main";
      const code = entry.code ?? functionText(modulePath, source, target);
      return { name: entry.name ?? target, target, code };
    });
  }

  /** Runs every case of the module's `__moss_test_cases__`, each in its own runtime, and reports each result. */
  async runModuleTests(
    modulePath: string,
    options: Pick<MossTestRunOptions, "inject"> & { onResult?: (result: MossTestCaseResult) => void } = {},
  ): Promise<MossModuleTestReport> {
    const cases = await this.testCases(modulePath);
    const results: MossTestCaseResult[] = [];
    for (const testCase of cases) {
      let result: MossTestCaseResult;
      try {
        const execution = await this.run(modulePath, {
          ...options,
          target: testCase.target,
          code: testCase.code,
        });
        result = { name: testCase.name, target: testCase.target, ok: execution.ok, execution };
      } catch (error) {
        result = { name: testCase.name, target: testCase.target, ok: false, error };
      }
      results.push(result);
      options.onResult?.(result);
    }
    const passed = results.filter((result) => result.ok).length;
    return {
      module: modulePath,
      ok: passed === results.length,
      passed,
      failed: results.length - passed,
      results,
    };
  }

  async #withRuntime<T>(
    modulePath: string,
    options: Pick<MossTestRunOptions, "inject" | "context">,
    body: (runtime: MossRuntime) => Promise<T>,
  ): Promise<T> {
    const runtime = await compileModuleRuntime(
      {
        modulePath,
        compiler: { sandbox: "in-process", ...this.#options.compiler },
        ...(this.#options.container === undefined ? {} : { container: this.#options.container }),
        ...(this.#options.hostSetup === undefined ? {} : { hostSetup: this.#options.hostSetup }),
        ...(options.inject === undefined ? {} : { inject: options.inject }),
      },
      options.context,
    );
    try {
      return await body(runtime);
    } finally {
      await runtime.close();
    }
  }
}

async function readSource(modulePath: string): Promise<string> {
  try {
    return await readFile(modulePath, "utf8");
  } catch (error) {
    throw new MossError(
      "module-not-found",
      `${modulePath}: cannot read the context module (${(error as Error).message})`,
      {
        file: modulePath,
      },
    );
  }
}

async function functionSource(modulePath: string, name: string): Promise<string> {
  return functionText(modulePath, await readSource(modulePath), name);
}

/** The text of the module's function `name` (a declaration or a `const name = (…) => …`), without `export`. */
function functionText(modulePath: string, source: string, name: string): string {
  const file = ts.createSourceFile(modulePath, source, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  for (const statement of file.statements) {
    if (
      ts.isFunctionDeclaration(statement) &&
      statement.name?.text === name &&
      statement.body !== undefined
    ) {
      return withoutExport(statement, source);
    }
    if (ts.isVariableStatement(statement)) {
      for (const declaration of statement.declarationList.declarations) {
        const initializer = declaration.initializer;
        if (
          ts.isIdentifier(declaration.name) &&
          declaration.name.text === name &&
          initializer !== undefined &&
          (ts.isArrowFunction(initializer) || ts.isFunctionExpression(initializer))
        ) {
          return withoutExport(statement, source);
        }
      }
    }
  }
  throw new MossError(
    "invalid-argument",
    `${modulePath}: no function "${name}" is declared at the top level of the module (a test target must be one, or the test case must give "code").`,
    { file: modulePath, target: name },
  );
}

function withoutExport(statement: ts.Statement, source: string): string {
  const modifiers = ts.canHaveModifiers(statement) ? (ts.getModifiers(statement) ?? []) : [];
  let start = statement.getStart();
  for (const modifier of modifiers) {
    if (modifier.kind === ts.SyntaxKind.ExportKeyword || modifier.kind === ts.SyntaxKind.DefaultKeyword) {
      start = modifier.getEnd();
    }
  }
  return source.slice(start, statement.getEnd()).trim();
}

/** Reads `export const __moss_test_cases__ = [...]` without running the module; only literals are allowed. */
function staticTestCases(modulePath: string, source: string): MossTestCaseSpec[] {
  const file = ts.createSourceFile(modulePath, source, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  for (const statement of file.statements) {
    if (!ts.isVariableStatement(statement)) continue;
    for (const declaration of statement.declarationList.declarations) {
      if (!ts.isIdentifier(declaration.name) || declaration.name.text !== TEST_CASES_EXPORT) continue;
      let initializer = declaration.initializer;
      while (
        initializer !== undefined &&
        (ts.isAsExpression(initializer) || ts.isSatisfiesExpression(initializer))
      ) {
        initializer = initializer.expression;
      }
      const fail = (node: ts.Node, what: string): never => {
        const { line, character } = file.getLineAndCharacterOfPosition(node.getStart());
        throw new MossError(
          "hook-shape",
          locatedMessage(
            modulePath,
            source,
            line + 1,
            character + 1,
            `${TEST_CASES_EXPORT} ${what}: write an array literal of target names or { name, target, code } objects with string literals`,
          ),
          { file: modulePath, line: line + 1, column: character + 1 },
        );
      };
      if (initializer === undefined || !ts.isArrayLiteralExpression(initializer)) {
        return fail(declaration, "is not an array literal");
      }
      return initializer.elements.map((element) => {
        const text = literalText(element);
        if (text !== undefined) return text;
        if (!ts.isObjectLiteralExpression(element))
          return fail(element, "has an entry that is neither a string nor an object");
        const entry: Record<string, string> = {};
        for (const property of element.properties) {
          const key =
            property.name !== undefined && ts.isIdentifier(property.name) ? property.name.text : undefined;
          const value = ts.isPropertyAssignment(property) ? literalText(property.initializer) : undefined;
          if (key === undefined || !["name", "target", "code"].includes(key) || value === undefined) {
            return fail(property, "has a property that is not name, target or code with a string literal");
          }
          entry[key] = value;
        }
        return entry;
      });
    }
  }
  return [];
}

function literalText(node: ts.Expression): string | undefined {
  return ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) ? node.text : undefined;
}
