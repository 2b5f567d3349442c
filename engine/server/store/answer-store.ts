// Answers to a paused run's requests: the server's one matcher of answers to requests, collected over several
// posts until every request has one (then the run is queued to resume), each post once per Idempotency-Key.
import { createHash } from "node:crypto";
import { requestAnswerProblem } from "../../answers.ts";
import type { Answer, PendingRequest } from "../../types.ts";
import type { AnswerEvent } from "../protocol.ts";
import { ServerError } from "../server-error.ts";
import type { SqlExecutor } from "./database.ts";
import { appendEvents, runStatusEvent } from "./event-log.ts";
import { CHANNELS, type RunRow, type StoreParts, threadNotFound, toRun } from "./store-rows.ts";
import { readStoredJson, storedJson } from "./stored-text.ts";

/** A response the answers endpoint gives (stored under its Idempotency-Key). */
export interface StoredResponse {
  status: number;
  body: Record<string, unknown>;
}

/**
 * Answers pending requests of the thread's paused run (of run `runId`, when the answer names the run it was given
 * for). Answers may come in several posts; once every request has one, the run is queued again to resume. With
 * an `idempotencyKey`, the first response is stored and returned again for the same key (nothing is applied
 * twice); the key with another body is 409.
 */
export async function answer(
  store: StoreParts,
  tenant: string,
  threadId: string,
  answers: Record<string, unknown>,
  idempotencyKey: string | undefined,
  runId?: string,
): Promise<StoredResponse> {
  const requestHash = createHash("sha256")
    .update(JSON.stringify(runId === undefined ? [threadId, answers] : [threadId, answers, runId]))
    .digest("hex");
  return store.database.transaction(async (executor) => {
    if (idempotencyKey !== undefined) {
      // Taken first and held to the commit: a second post with the same key waits here, then sees the first.
      await executor.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`${tenant}\n${idempotencyKey}`]);
      const [stored] = await executor.query<{
        request_hash: string;
        status: number;
        body: Record<string, unknown>;
      }>("SELECT request_hash, status, body FROM moss_idempotency_keys WHERE tenant = $1 AND key = $2", [
        tenant,
        idempotencyKey,
      ]);
      if (stored !== undefined) {
        if (stored.request_hash !== requestHash) {
          throw new ServerError(
            409,
            "idempotency-key-reused",
            `Idempotency-Key "${idempotencyKey}" was already used with another request; use a new key for new answers.`,
          );
        }
        return { status: stored.status, body: readStoredJson(stored.body) };
      }
    }
    const response = await applyAnswers(store, executor, tenant, threadId, answers, runId);
    if (idempotencyKey !== undefined) {
      await executor.query(
        "INSERT INTO moss_idempotency_keys (tenant, key, request_hash, status, body) VALUES ($1, $2, $3, $4, $5)",
        [tenant, idempotencyKey, requestHash, response.status, storedJson(response.body)],
      );
    }
    return response;
  });
}

/**
 * The one matcher of answers to requests on the server (native API, the client, the playground, AG-UI resume): an
 * answer applies only to a request, by its id (`r<call>-<tag>`: one request of one run), that the thread's paused
 * run waits for now, and only to that run when the answer names one. Any other id (a request of another run, of
 * a finished run, of a pause the run went past) is 404 `request-unknown`, and nothing of the post is applied.
 */
async function applyAnswers(
  store: StoreParts,
  executor: SqlExecutor,
  tenant: string,
  threadId: string,
  answers: Record<string, unknown>,
  runId?: string,
): Promise<StoredResponse> {
  const thread = await executor.query("SELECT 1 FROM moss_threads WHERE tenant = $1 AND id = $2", [
    tenant,
    threadId,
  ]);
  if (thread.length === 0) throw threadNotFound(threadId);
  const [run] = await executor.query<RunRow>(
    `SELECT * FROM moss_runs WHERE tenant = $1 AND thread_id = $2 AND status = 'pending' FOR UPDATE`,
    [tenant, threadId],
  );
  const ids = Object.keys(answers);
  if (run === undefined || (runId !== undefined && run.id !== runId)) {
    throw new ServerError(
      404,
      "request-unknown",
      `${runId === undefined ? `Thread "${threadId}" has no run` : `Run "${runId}" of thread "${threadId}" is not`} waiting for an answer (request ${ids.map((id) => `"${id}"`).join(", ")}).`,
    );
  }
  const requests = await pendingRequests(executor, run.id, false);
  const byId = new Map(requests.map((request) => [request.id, request]));
  const unknown = ids.filter((id) => !byId.has(id));
  if (unknown.length > 0) {
    throw new ServerError(
      404,
      "request-unknown",
      `No pending request of thread "${threadId}" has the id ${unknown.map((id) => `"${id}"`).join(", ")}; it waits for ${requests.map((request) => `"${request.id}"`).join(", ")}.`,
    );
  }
  for (const id of ids) {
    const problem = requestAnswerProblem(byId.get(id)!, answers[id]);
    if (problem !== undefined) throw new ServerError(400, "answer-invalid", `Request "${id}" ${problem}.`);
  }
  for (const id of ids) {
    await executor.query(
      `UPDATE moss_pending_requests SET answer = $3, answered_at = clock_timestamp()
       WHERE run_id = $1 AND id = $2`,
      [run.id, id, storedJson(answers[id])],
    );
  }
  // One event per answer applied: the decision, recorded in the thread (the log redacts its texts).
  const at = new Date().toISOString();
  const decisions = ids.map((id) => answerEvent(run.id, byId.get(id)!, answers[id] as Answer, tenant, at));
  const rows = await executor.query<{ id: string; answer: Answer | null }>(
    "SELECT id, answer FROM moss_pending_requests WHERE run_id = $1",
    [run.id],
  );
  if (rows.some((row) => row.answer === null)) {
    await appendEvents(executor, store.view, tenant, threadId, run.id, decisions);
    return { status: 202, body: { run: toRun(run) } };
  }
  const all = Object.fromEntries(rows.map((row) => [row.id, readStoredJson(row.answer!)]));
  const [queued] = await executor.query<RunRow>(
    `UPDATE moss_runs SET status = 'queued', answers = $2, updated_at = clock_timestamp()
     WHERE id = $1 RETURNING *`,
    [run.id, storedJson(all)],
  );
  await executor.query("DELETE FROM moss_pending_requests WHERE run_id = $1", [run.id]);
  const resumed = toRun(queued!);
  await appendEvents(executor, store.view, tenant, threadId, run.id, [...decisions, runStatusEvent(resumed)]);
  await executor.query("SELECT pg_notify($1, $2)", [CHANNELS.runs, run.id]);
  return { status: 202, body: { run: resumed } };
}

/** The requests a paused run waits for, in order (only the unanswered ones with `unansweredOnly`). */
export async function pendingRequests(
  executor: SqlExecutor,
  runId: string,
  unansweredOnly: boolean,
): Promise<PendingRequest[]> {
  const rows = await executor.query<{ request: PendingRequest }>(
    `SELECT request FROM moss_pending_requests WHERE run_id = $1 ${unansweredOnly ? "AND answer IS NULL" : ""}
     ORDER BY position`,
    [runId],
  );
  return rows.map((row) => readStoredJson(row.request));
}

/** The `answer` event of one applied answer (its shape was checked against its request). */
function answerEvent(
  runId: string,
  request: PendingRequest,
  answer: Answer,
  tenant: string,
  at: string,
): AnswerEvent {
  const decision =
    "answer" in answer
      ? { answer: answer.answer }
      : {
          approved: answer.approved,
          ...("reason" in answer && answer.reason ? { reason: answer.reason } : {}),
        };
  return {
    type: "answer",
    runId,
    requestId: request.id,
    kind: request.kind,
    ...decision,
    by: { tenant },
    at,
  };
}
