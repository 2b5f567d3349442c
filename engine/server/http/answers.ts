// `/v1/threads/:threadId/answers`: answers to the requests a paused run waits for (once per Idempotency-Key).
import { Hono } from "hono";
import { ServerError } from "../server-error.ts";
import type { ServerStore } from "../store/index.ts";
import { readJson } from "./read-json-body.ts";
import { type ApiEnv, optionalField, threadId } from "./request-checks.ts";

/** What the answers resource needs of the app. */
export interface AnswerRoutesOptions {
  store: ServerStore;
  maxBodyBytes(tenant: string): number;
}

export function answerRoutes(options: AnswerRoutesOptions): Hono<ApiEnv> {
  const { store } = options;
  const app = new Hono<ApiEnv>();

  app.post("/v1/threads/:threadId/answers", async (c) => {
    const tenant = c.get("tenant");
    const id = threadId(c.req.param("threadId"));
    const body = await readJson(c, options.maxBodyBytes(tenant), false);
    const answers = body.answers;
    if (
      typeof answers !== "object" ||
      answers === null ||
      Array.isArray(answers) ||
      Object.keys(answers).length === 0
    ) {
      throw new ServerError(
        400,
        "answers-invalid",
        'The body needs "answers": an object mapping request ids to answers, e.g. {"answers": {"r2-3fa9c1b2d4e5": {"approved": true}}}.',
      );
    }
    // The run the answers were given for (optional): answers for any other run apply to nothing.
    const runId = optionalField(body, "runId", "string") as string | undefined;
    const key = c.req.header("idempotency-key");
    if (key !== undefined && (key.length === 0 || key.length > 200)) {
      throw new ServerError(400, "idempotency-key-invalid", "Idempotency-Key must be 1 to 200 characters.");
    }
    const response = await store.answer(tenant, id, answers as Record<string, unknown>, key, runId);
    return c.json(response.body, response.status as 202);
  });

  return app;
}
