// What the server benchmarks share: a `moss serve` core on PGlite over the ledger fixture, its model the fake OpenAI
// server answering every request the same way.
import { join } from "node:path";
import { OpenAILanguageModel } from "../engine/agent/openai-language-model.ts";
import { type MossServer, type MossServerOptions, startMossServer } from "../engine/server/moss-server.ts";
import { TenantTokens } from "../engine/server/tenant-tokens.ts";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../test/agent/fake-openai-server.ts";
import { endlessReplies } from "./bench-fixtures.ts";

/**
 * Starts the ledger module's server in `directory` (PGlite, HTTP on a free port of 127.0.0.1, a tenant per token
 * `tenant:secret`) with the fake model answering "Done." to everything.
 */
export async function startLedgerServer(
  directory: string,
  tokens: string[],
  options: Pick<MossServerOptions, "worker" | "limits">,
): Promise<{ server: MossServer; model: FakeOpenAIServer }> {
  const model = await startFakeOpenAIServer(endlessReplies(() => ({ content: "Done." })));
  process.env.MOSS_LEDGER_LOG = join(directory, "ledger.log");
  try {
    const server = await startMossServer({
      modulePath: "test/server/fixtures/ledger/context.ts",
      model: new OpenAILanguageModel({
        baseUrl: model.baseUrl,
        apiKey: "bench",
        model: "fake-model",
        maxRetries: 0,
      }),
      database: { dataDirectory: join(directory, "pglite") },
      http: { port: 0, tokens: TenantTokens.parse(tokens, "bench") },
      ...options,
    });
    return { server, model };
  } catch (error) {
    await model.close();
    throw error;
  }
}
