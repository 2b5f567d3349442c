import path from "node:path";
import { decodeProperties, partitionProperties } from "../context/index.ts";
import { locatedMessage, MossError } from "../errors.ts";
import { type DataFieldMisfit, dataFieldMisfits, type ModuleAnalysis } from "../module/index.ts";
import { propertyAccess } from "../property-access.ts";
import type { MossContext } from "../types.ts";

/** The data fields a context restores, and what the author should know about the rest of it. */
export interface RestoredContext {
  /** Decoded values of the declared data fields the context holds. */
  data: Record<string, unknown>;
  /** Properties the module no longer declares as data fields: kept in the context, reported here once. */
  undeclared: string[];
  warnings: string[];
}

/** Options of `restoreContext`. */
export interface RestoreContextOptions {
  /** Where the context came from (a file), named in errors; default "the joined MossContext". */
  source?: string | undefined;
  /** Bound of each field's expanded size when decoding. */
  maxBytes: number;
}

/**
 * Checks a context against the module it is applied to and decodes its data fields. A context written for another
 * module is MossError `context-wrong-module` naming both; a stored value that does not fit its field's declared
 * type is MossError `context-mismatch` naming the field (`properties.turns: expected number, got string "zero"`)
 * and where the field is declared. Nothing is changed: the caller loads nothing and writes nothing on an error.
 */
export function restoreContext(
  context: MossContext,
  analysis: ModuleAnalysis,
  displayPath: string,
  options: RestoreContextOptions,
): RestoredContext {
  const source = options.source ?? "the joined MossContext";
  if (!sameModule(context.module, displayPath)) {
    throw new MossError(
      "context-wrong-module",
      `${source} was written for the module ${context.module} (${path.resolve(context.module)}), not ${displayPath} (${path.resolve(displayPath)}): it is not loaded. Give this module its own context file; if it is the same module, moved or named from another directory, set "module" in the file to ${JSON.stringify(displayPath)}`,
      { file: options.source, contextModule: context.module, module: displayPath },
    );
  }
  const fields = analysis.mossClass?.fields ?? [];
  const dataFields = fields.filter((field) => field.kind === "data").map((field) => field.name);
  const { declared, undeclared } = partitionProperties(context.properties, dataFields);
  let decoded: Record<string, unknown>;
  try {
    decoded = decodeProperties(declared, { maxBytes: options.maxBytes });
  } catch (error) {
    if (!MossError.is(error) || options.source === undefined) throw error;
    throw new MossError(error.code, `${options.source}: ${error.message}`, {
      ...error.details,
      file: options.source,
    });
  }
  const present = fields.map((field) => field.name).filter((name) => Object.hasOwn(decoded, name));
  const misfits = dataFieldMisfits(analysis.declaredTypes, present, (name) => decoded[name]);
  const refused = new Set(misfits.map((misfit) => misfit.field));
  const data: Record<string, unknown> = {};
  for (const name of present) if (!refused.has(name)) data[name] = decoded[name];
  if (misfits.length > 0) throw mismatchError(misfits, analysis, displayPath, options.source, source);
  const kept = Object.keys(undeclared);
  const warnings =
    kept.length === 0
      ? []
      : [
          `${source} holds ${kept.map((name) => `properties${propertyAccess(name)}`).join(", ")}, which Moss in ${displayPath} does not declare as ${kept.length === 1 ? "a data field" : "data fields"}: kept in the context, not loaded`,
        ];
  return { data, undeclared: kept, warnings };
}

/**
 * MossError `context-mismatch` for values that do not fit their fields' declared types (`dataFieldMisfits`), naming
 * each field, the problem and where the first field is declared: a stored context, or data the host set at compile.
 */
export function mismatchError(
  misfits: readonly DataFieldMisfit[],
  analysis: ModuleAnalysis,
  displayPath: string,
  file: string | undefined,
  source: string,
): MossError {
  const first = misfits[0]!;
  const field = analysis.mossClass?.fields.find((candidate) => candidate.name === first.field);
  const declaredAt =
    field === undefined
      ? ""
      : `\n\n${locatedMessage(displayPath, analysis.source, field.line, field.column, `Moss.${field.name} is declared here`)}`;
  const count = misfits.length === 1 ? "a stored value does" : `${misfits.length} stored values do`;
  return new MossError(
    "context-mismatch",
    `${source}: ${count} not fit the field's declared type in ${displayPath}; nothing was loaded\n${misfits
      .map((misfit) => `  ${misfit.problem}`)
      .join("\n")}${declaredAt}`,
    {
      file,
      module: displayPath,
      fields: misfits.map((misfit) => misfit.field),
      problems: misfits.map((misfit) => misfit.problem),
      ...(field === undefined ? {} : { line: field.line, column: field.column }),
    },
  );
}

/**
 * Whether a context's `module` names this module: the same path, or the same file once both are resolved from the
 * working directory. Nothing looser: context modules are often all called `context.ts`.
 */
function sameModule(stored: string, displayPath: string): boolean {
  return stored === displayPath || path.resolve(stored) === path.resolve(displayPath);
}
