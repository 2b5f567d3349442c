import { readFile } from "node:fs/promises";
import { ts } from "ts-morph";
import type { Container, Token } from "../../container/index.ts";
import type { MossCompilerOptions } from "../compiler/index.ts";
import { locatedMessage, MossError } from "../errors.ts";
import type { MossRuntime } from "../runtime/index.ts";
import type { Execution, ExecutionErrorKind, MossContext } from "../types.ts";
import { compileModuleRuntime } from "./module-runtime.ts";

/**
 * One entry of a module's `__moss_test_cases__`: a target name (a function declared in the module, usually in a
 * `// <moss-hide>` region), or an object. With `code`, the code runs and `target` (default `main`) is called;
 * without `code`, the source of the module's function `target` is run as the model's code would be. With
 * `expectError`, the case tests an error path: it passes only when the run fails with that `ExecutionError` kind
 * (and, if given, a message matching the pattern).
 */
export type MossTestCaseSpec =
  | string
  | { name?: string; target?: string; code?: string; expectError?: ExecutionErrorKind | MossExpectedError };

/** The failure a test case expects: its kind, and optionally a pattern its message must match. */
export interface MossExpectedError {
  kind: ExecutionErrorKind;
  /** A substring of the error message, or a regular expression it must match. */
  message?: string | RegExp;
}

/** A test case after defaults are applied. */
export interface MossTestCase {
  name: string;
  target: string;
  code: string;
  /** Set when the case expects the run to fail this way. */
  expectError?: MossExpectedError;
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
  /** The failure the case expected, if it expected one. */
  expectError?: MossExpectedError;
  /** Why the case failed when its execution alone does not say (an expected error that did not happen, or another one). */
  failure?: string;
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
  /**
   * Passed to every compiler. Default sandbox: `in-process` (tests need no crash containment) when this process
   * runs with `--no-node-snapshot`, which isolated-vm needs, else `process` (child processes started with it).
   */
  compiler?: Omit<MossCompilerOptions, "container">;
  /**
   * Run the production host setup (the module's sibling `<name>.host.ts` `setup(compiler)`) instead of the module's
   * `__moss_test_setup__(compiler)` fakes. Default false: tests run against fakes, never against real services.
   */
  host?: boolean;
}

const TEST_CASES_EXPORT = "__moss_test_cases__";

/**
 * Tests for context modules (after GhostOS's MossTestSuit): render a module's prompt, run code or one of the
 * module's functions in a fresh runtime with fakes injected, and run the module's own `__moss_test_cases__`,
 * each in its own runtime. Usable from vitest and from `moss test`.
 */
export class MossTestSuite {
  readonly #options: MossTestSuiteOptions;

  /** While a suite runs: the last case's runtime, closed once the next case's runtime is compiled. */
  #kept: MossRuntime | undefined;
  #keepLast = false;

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
      const expected = entry.expectError;
      const expectError = typeof expected === "string" ? { kind: expected } : expected;
      return {
        name: entry.name ?? target,
        target,
        code,
        ...(expectError === undefined ? {} : { expectError }),
      };
    });
  }

  /** Runs every case of the module's `__moss_test_cases__`, each in its own runtime, and reports each result. */
  async runModuleTests(
    modulePath: string,
    options: Pick<MossTestRunOptions, "inject"> & {
      onStart?: (testCase: MossTestCase) => void;
      onResult?: (result: MossTestCaseResult) => void;
    } = {},
  ): Promise<MossModuleTestReport> {
    const cases = await this.testCases(modulePath);
    const results: MossTestCaseResult[] = [];
    this.#keepLast = true;
    try {
      await this.#runCases(modulePath, cases, results, options);
    } finally {
      this.#keepLast = false;
      const last = this.#kept;
      this.#kept = undefined;
      await last?.close();
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

  async #runCases(
    modulePath: string,
    cases: MossTestCase[],
    results: MossTestCaseResult[],
    options: Pick<MossTestRunOptions, "inject"> & {
      onStart?: (testCase: MossTestCase) => void;
      onResult?: (result: MossTestCaseResult) => void;
    },
  ): Promise<void> {
    for (const testCase of cases) {
      options.onStart?.(testCase);
      let result: MossTestCaseResult;
      try {
        const execution = await this.run(modulePath, {
          ...options,
          target: testCase.target,
          code: testCase.code,
        });
        // A case has no one to answer a person's requests: a run that pauses fails, and says what it waited for.
        const paused = execution.pending
          ? `the run paused waiting for a person: ${execution.pending.requests
              .map((request) =>
                request.kind === "approval"
                  ? `approve ${request.service === undefined ? "" : `${request.service}.`}${request.member}`
                  : `answer "${request.question}"`,
              )
              .join(", ")}`
          : undefined;
        const failure =
          paused ??
          (testCase.expectError === undefined
            ? undefined
            : unmetExpectation(testCase.expectError, execution));
        result = {
          name: testCase.name,
          target: testCase.target,
          ok:
            paused === undefined &&
            (testCase.expectError === undefined ? execution.ok : failure === undefined),
          execution,
          ...(testCase.expectError === undefined ? {} : { expectError: testCase.expectError }),
          ...(failure === undefined ? {} : { failure }),
        };
      } catch (error) {
        result = {
          name: testCase.name,
          target: testCase.target,
          ok: false,
          error,
          ...(testCase.expectError === undefined ? {} : { expectError: testCase.expectError }),
        };
      }
      results.push(result);
      options.onResult?.(result);
    }
  }

  async #withRuntime<T>(
    modulePath: string,
    options: Pick<MossTestRunOptions, "inject" | "context">,
    body: (runtime: MossRuntime) => Promise<T>,
  ): Promise<T> {
    const host = this.#options.host === true;
    const runtime = await compileModuleRuntime(
      {
        modulePath,
        compiler: { sandbox: defaultSandbox(), ...this.#options.compiler, testSetup: !host },
        ...(this.#options.container === undefined ? {} : { container: this.#options.container }),
        hostSetup: host,
        ...(options.inject === undefined ? {} : { inject: options.inject }),
      },
      options.context,
    ).catch((error: unknown) => {
      throw MossError.is(error, "binding-missing") ? withTestBindingHint(error, host) : error;
    });
    // The cases of one suite run each in a runtime of its own, but the runtime before stays open until this one is
    // compiled: its type-check worker (shared by every runtime of the module's source) then serves the next case
    // too, instead of ending with the case and starting again, its lib parsed anew, for the next.
    const previous = this.#kept;
    this.#kept = undefined;
    await previous?.close();
    try {
      return await body(runtime);
    } finally {
      if (this.#keepLast) this.#kept = runtime;
      else await runtime.close();
    }
  }
}

/** In-process isolates need `--no-node-snapshot` in this process (a vitest config may not pass it to workers). */
function defaultSandbox(): "in-process" | "process" {
  const flags = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? "").split(/\s+/)];
  return flags.includes("--no-node-snapshot") ? "in-process" : "process";
}

/** A missing binding in a test: the field and token it names, and where a test binds them. */
function withTestBindingHint(error: MossError, host: boolean): MossError {
  const token = String(error.details.token ?? "the service");
  const where = host
    ? "the host setup (name.host.ts) did not bind it"
    : `bind a fake in the module's hidden __moss_test_setup__(compiler) (e.g. compiler.bind(${token}, new Fake())), pass it with inject, or run the production host setup with moss test --host ({ host: true })`;
  return new MossError("binding-missing", `${error.message}\nIn a test: ${where}.`, error.details, {
    cause: error,
  });
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
        const entry: { name?: string; target?: string; code?: string; expectError?: MossExpectedError } = {};
        for (const property of element.properties) {
          const key =
            property.name !== undefined &&
            (ts.isIdentifier(property.name) || ts.isStringLiteral(property.name))
              ? property.name.text
              : undefined;
          if (key === "expectError" && ts.isPropertyAssignment(property)) {
            entry.expectError = expectedError(property.initializer, fail);
            continue;
          }
          const value = ts.isPropertyAssignment(property) ? literalText(property.initializer) : undefined;
          if (key === undefined || !["name", "target", "code"].includes(key) || value === undefined) {
            return fail(
              property,
              "has a property that is not name, target or code with a string literal, or expectError",
            );
          }
          entry[key as "name" | "target" | "code"] = value;
        }
        return entry;
      });
    }
  }
  return [];
}

/** Every ExecutionError kind, so a case's `expectError` is checked when the module is read. */
const ERROR_KINDS: Record<ExecutionErrorKind, true> = {
  syntax: true,
  type: true,
  runtime: true,
  timeout: true,
  memory: true,
  "replay-diverged": true,
  "output-limit": true,
  "call-limit": true,
  crash: true,
  aborted: true,
};

/** Reads `expectError: "kind"` or `expectError: { kind: "kind", message: "text" | /pattern/ }`. */
function expectedError(node: ts.Expression, fail: (node: ts.Node, what: string) => never): MossExpectedError {
  const kindOf = (kindNode: ts.Expression): ExecutionErrorKind => {
    const kind = literalText(kindNode);
    if (kind === undefined || !Object.hasOwn(ERROR_KINDS, kind)) {
      return fail(
        kindNode,
        `has an expectError kind that is not one of ${Object.keys(ERROR_KINDS)
          .map((name) => `"${name}"`)
          .join(", ")}`,
      );
    }
    return kind as ExecutionErrorKind;
  };
  if (!ts.isObjectLiteralExpression(node)) return { kind: kindOf(node) };
  let kind: ExecutionErrorKind | undefined;
  let message: string | RegExp | undefined;
  for (const property of node.properties) {
    const key =
      property.name !== undefined && ts.isIdentifier(property.name) ? property.name.text : undefined;
    if (key === "kind" && ts.isPropertyAssignment(property)) kind = kindOf(property.initializer);
    else if (key === "message" && ts.isPropertyAssignment(property)) {
      const initializer = property.initializer;
      const text = literalText(initializer);
      if (text !== undefined) message = text;
      else if (ts.isRegularExpressionLiteral(initializer)) {
        const literal = initializer.text;
        const close = literal.lastIndexOf("/");
        try {
          message = new RegExp(literal.slice(1, close), literal.slice(close + 1));
        } catch (error) {
          return fail(initializer, `has an invalid message pattern (${(error as Error).message})`);
        }
      } else return fail(initializer, "has an expectError message that is not a string or /pattern/ literal");
    } else return fail(property, "has an expectError property that is not kind or message");
  }
  if (kind === undefined) return fail(node, 'has an expectError without kind (e.g. { kind: "runtime" })');
  return message === undefined ? { kind } : { kind, message };
}

/** Why an execution does not meet the failure a case expects, or undefined when it does. */
export function unmetExpectation(expected: MossExpectedError, execution: Execution): string | undefined {
  const wanted = `a ${expected.kind} error${expected.message === undefined ? "" : ` with a message matching ${describePattern(expected.message)}`}`;
  const error = execution.error;
  if (execution.ok || error === undefined) {
    const returned =
      execution.returns === undefined ? "" : ` (returned ${JSON.stringify(execution.returns)})`;
    return `expected ${wanted}, but the code ran without error${returned}`;
  }
  if (error.kind !== expected.kind) {
    return `expected ${wanted}, but got a ${error.kind} error: ${error.message}`;
  }
  const message = expected.message;
  if (message !== undefined) {
    const matches =
      typeof message === "string" ? error.message.includes(message) : message.test(error.message);
    if (!matches) return `expected ${wanted}, but the ${error.kind} error was: ${error.message}`;
  }
  return undefined;
}

function describePattern(pattern: string | RegExp): string {
  return typeof pattern === "string" ? JSON.stringify(pattern) : String(pattern);
}

function literalText(node: ts.Expression): string | undefined {
  return ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) ? node.text : undefined;
}
