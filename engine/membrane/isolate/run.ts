// One run: the model's script evaluated, its target called with its arguments, and the envelope (the return value,
// the data snapshot, the error or the limit hit) handed to the host through the `done` bridge when the run settles.
import type { SandboxEnvelope } from "../protocol.ts";
import {
  JSONParse,
  JSONStringify,
  MapClear,
  PromiseThen,
  ReferenceErrorCtor,
  ReflectApply,
  ReflectGet,
  ReflectHas,
  ReflectSetPrototypeOf,
  StringIncludesMethod,
  TypeErrorCtor,
} from "../wire/intrinsics.ts";
import { expectRunScript } from "./call-site.ts";
import { beginClock } from "./clock.ts";
import { describeError } from "./errors.ts";
import { IndirectEval } from "./evaluate.ts";
import { isModelProxy } from "./lockdown.ts";
import { knownHandle } from "./proxy-shapes.ts";
import { append } from "./records.ts";
import { snapshotData, WIRE_SLACK } from "./snapshot.ts";
import { beginRun, type IsolateState } from "./state.ts";

const StringIncludes = (text: string, part: string): boolean =>
  ReflectApply(StringIncludesMethod, text, [part]);

/** Evaluates the model's script and starts its target in one entry; frames of the script are named `filename`. */
export function runScript(
  state: IsolateState,
  maxStdoutBytes: number,
  source: string,
  filename: string,
  target: string,
  argumentsJson: string,
  maxResultBytes: number,
  replayJson: string,
): void {
  beginRun(state, maxStdoutBytes);
  beginClock(state, replayJson);
  let scriptError = "";
  try {
    expectRunScript();
    IndirectEval(`${source}\n//# sourceURL=${filename}`);
  } catch (caught) {
    const described = describeError(caught);
    const parsed = described.name === "SyntaxError" && !StringIncludes(described.stack ?? "", `${filename}:`);
    scriptError = JSONStringify({ __proto__: null, kind: parsed ? "syntax" : "runtime", ...described });
  }
  start(state, target, argumentsJson, maxResultBytes, scriptError);
}

// Starts a run and returns at once; the envelope reaches the host through `done` when the run settles.
function start(
  state: IsolateState,
  target: string,
  argumentsJson: string,
  maxResultBytes: number,
  scriptError: string,
): void {
  ReflectApply(PromiseThen, run(state, target, argumentsJson, maxResultBytes, scriptError), [state.done]);
}

async function run(
  state: IsolateState,
  target: string,
  argumentsJson: string,
  maxResultBytes: number,
  scriptError: string,
): Promise<string> {
  const { codec, global } = state;
  let ok = false;
  let returned: unknown;
  let error: any;
  if (scriptError !== "") {
    error = JSONParse(scriptError);
  } else {
    try {
      if (!ReflectHas(global, target)) {
        throw new ReferenceErrorCtor(
          `${target} is not defined: the code must declare \`function ${target}(...)\` at its top level`,
        );
      }
      const fn = ReflectGet(global, target);
      if (typeof fn !== "function")
        throw new TypeErrorCtor(`${target} is not a function (it is ${typeof fn})`);
      const specs = JSONParse(argumentsJson);
      const args: unknown[] = [];
      for (let i = 0; i < specs.length; i++) {
        const spec = specs[i];
        if (typeof spec.local === "string") {
          if (!ReflectHas(global, spec.local)) throw new ReferenceErrorCtor(`${spec.local} is not defined`);
          append(args, ReflectGet(global, spec.local));
        } else {
          append(args, codec.decode(spec.wire, state.decodeOptions));
        }
      }
      let result = ReflectApply(fn, undefined, args);
      if (
        (typeof result === "object" || typeof result === "function") &&
        result !== null &&
        typeof (result as any).then === "function"
      ) {
        result = await result;
      }
      returned = result;
      ok = true;
    } catch (caught) {
      error = describeError(caught);
    }
  }
  ReflectApply(MapClear, state.pending, []);
  return JSONStringify(envelopeOf(state, ok, returned, error, maxResultBytes));
}

/**
 * The run's envelope: the data snapshot first, then the return value in what is left of the result budget, and the
 * error (the result's, the limit hit, or the code's). Prototype-less, like every part of it: JSON.stringify must
 * find no toJSON planted by model code.
 */
function envelopeOf(
  state: IsolateState,
  ok: boolean,
  returned: unknown,
  error: any,
  maxResultBytes: number,
): SandboxEnvelope {
  const warnings: string[] = [];
  ReflectSetPrototypeOf(warnings, null);
  const envelope: SandboxEnvelope = { __proto__: null, ok, warnings } as any;
  let budget = maxResultBytes;
  let resultError: any;
  // The text shares one bound too: the snapshot's text is taken from what the return value may use.
  let textBudget = WIRE_SLACK * maxResultBytes;
  if (state.moss !== undefined) {
    const snapshot = snapshotData(state, warnings, budget);
    envelope.mossData = snapshot.text;
    budget -= snapshot.expanded;
    textBudget -= snapshot.length;
  }
  if (ok) {
    try {
      envelope.returns = state.codec.encode(returned, {
        __proto__: null,
        rootPath: "returns",
        knownHandle,
        // After the snapshot no model code runs: a getter or a Proxy in the result is left out, not read.
        isProxy: isModelProxy,
        onUnsupported: (unsupported: { path: string; description: string }) =>
          append(warnings, `${unsupported.path} is ${unsupported.description} and was not returned`),
        maxLength: textBudget,
        maxExpanded: budget,
      } as any);
    } catch (caught) {
      resultError = describeError(caught);
    }
  }
  const limitHit = state.limitHit;
  if (resultError !== undefined) {
    envelope.ok = false;
    envelope.returns = undefined;
    envelope.error =
      resultError.name === "WireLimitError"
        ? ({
            __proto__: null,
            kind: "output-limit",
            name: "RangeError",
            message: `the return value cannot be sent back: ${resultError.message} (the result limit of ${maxResultBytes} bytes counts the moss data too)`,
          } as any)
        : ({ __proto__: null, kind: "runtime", ...resultError } as any);
  } else if (limitHit !== null) {
    envelope.ok = false;
    envelope.returns = undefined;
    const limitError = error !== undefined && error.message === limitHit.message ? error : undefined;
    envelope.error = {
      __proto__: null,
      kind: limitHit.kind,
      name: "RangeError",
      message: limitHit.message,
      stack: limitError?.stack,
    } as any;
  } else if (!ok) {
    envelope.error = { __proto__: null, kind: "runtime", ...error } as any;
  }
  return envelope;
}
