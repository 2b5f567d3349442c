// The worker thread that validates MCP tool results against their output schemas (see output-validator.ts): the
// server's schema (its regular expressions, `uniqueItems` over large arrays) runs here, never on the host's thread.
import { parentPort } from "node:worker_threads";
import { Ajv, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";

/** A request to the worker. */
export interface ValidationRequest {
  id: number;
  schema: object;
  value: unknown;
}

/** The worker's answer: `error` is Ajv's text when the value does not fit, `failed` when the schema cannot be used. */
export interface ValidationReply {
  id: number;
  error?: string;
  failed?: string;
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => void;
const ajv = new Ajv({ strict: false, validateFormats: true, validateSchema: false, allErrors: false });
addFormats(ajv);
const compiled = new Map<string, ValidateFunction>();

parentPort?.on("message", (request: ValidationRequest) => {
  const reply: ValidationReply = { id: request.id };
  try {
    const key = JSON.stringify(request.schema);
    let validate = compiled.get(key);
    if (!validate) {
      validate = ajv.compile(request.schema);
      compiled.set(key, validate);
    }
    if (!validate(request.value)) reply.error = ajv.errorsText(validate.errors).slice(0, 2_000);
  } catch (error) {
    reply.failed = (error instanceof Error ? error.message : String(error)).slice(0, 2_000);
  }
  parentPort?.postMessage(reply);
});
