#!/usr/bin/env node
// `npm run test:llama -- --model <file.gguf>`: the agents against llama.cpp's own llama-server, built from source.
// Not part of `npm test`. Steps: find (or install into the cache, with --ignore-scripts) the node-llama-cpp
// package, clone the llama.cpp git bundle it ships, build llama-server with cmake, start it on 127.0.0.1 with the
// given GGUF model, wait for /health, then run `moss agent` on the sphero and todo examples against it.
import { spawn, spawnSync } from "node:child_process";
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  statSync,
} from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { cpus, homedir, tmpdir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

/** The node-llama-cpp release whose llama.cpp bundle is built when the project does not have the package. */
const NODE_LLAMA_CPP = "node-llama-cpp@3.22.1";
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

const USAGE = `Usage: npm run test:llama -- --model <file.gguf> [options]

Builds llama.cpp's llama-server from the git bundle inside the node-llama-cpp npm package, starts it on
127.0.0.1 with the model, and runs the sphero and todo agents against it.
  --model <file.gguf>      the model (default $MOSS_LLAMA_MODEL)
  --llama-server <path>    use this llama-server binary instead of building one (default $MOSS_LLAMA_SERVER)
  --cache <dir>            node-llama-cpp, the llama.cpp source and the build (default $MOSS_LLAMA_CACHE, then ~/.cache/moss-ts/llama)
  --ctx-size <n>           llama-server's context size (default 4096)
  --jinja                  start llama-server with --jinja, so it parses tool calls (default: they arrive as text)
  --max-steps <n>          --max-steps of each agent run (default 6)
  --jobs <n>               parallel build jobs (default: the number of CPUs)
  --dry-run                check the tools, the model and the bundle, print the plan, build and run nothing
Exit code: 0 when every agent run ended with a documented stop reason other than an error; 1 when one failed
(exit code 1 of moss agent) or a step of the script failed; 2 on a usage error.`;

class UsageError extends Error {}
class StepError extends Error {}

function options() {
  let parsed;
  try {
    parsed = parseArgs({
      options: {
        model: { type: "string" },
        "llama-server": { type: "string" },
        cache: { type: "string" },
        "ctx-size": { type: "string" },
        jinja: { type: "boolean" },
        "max-steps": { type: "string" },
        jobs: { type: "string" },
        "dry-run": { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
      allowPositionals: false,
    }).values;
  } catch (error) {
    throw new UsageError(error.message);
  }
  if (parsed.help) return { help: true };
  const env = process.env;
  const model = parsed.model ?? nonEmpty(env.MOSS_LLAMA_MODEL);
  if (model === undefined) {
    throw new UsageError(
      "no model: pass --model <file.gguf> or set MOSS_LLAMA_MODEL (any GGUF file, e.g. a small Qwen or Llama instruct model).",
    );
  }
  const modelPath = resolve(model);
  if (!existsSync(modelPath) || !statSync(modelPath).isFile()) {
    throw new UsageError(`the model file ${modelPath} does not exist.`);
  }
  const magic = Buffer.alloc(4);
  const descriptor = openSync(modelPath, "r");
  readSync(descriptor, magic, 0, 4, 0);
  closeSync(descriptor);
  if (magic.toString("latin1") !== "GGUF") {
    throw new UsageError(`${modelPath} is not a GGUF model file (it does not start with "GGUF").`);
  }
  const server = parsed["llama-server"] ?? nonEmpty(env.MOSS_LLAMA_SERVER);
  return {
    help: false,
    modelPath,
    serverPath: server === undefined ? undefined : resolve(server),
    cache: resolve(
      parsed.cache ?? nonEmpty(env.MOSS_LLAMA_CACHE) ?? join(homedir(), ".cache", "moss-ts", "llama"),
    ),
    contextSize: positive(parsed["ctx-size"], "--ctx-size", 4096),
    jinja: parsed.jinja === true,
    maxSteps: positive(parsed["max-steps"], "--max-steps", 6),
    jobs: positive(parsed.jobs, "--jobs", Math.max(1, cpus().length)),
    dryRun: parsed["dry-run"] === true,
  };
}

function positive(text, option, fallback) {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1)
    throw new UsageError(`${option} needs a positive integer, got "${text}".`);
  return value;
}

function nonEmpty(value) {
  return value === undefined || value.trim() === "" ? undefined : value;
}

/** The path of a program on PATH, or undefined. */
function which(program) {
  for (const folder of (process.env.PATH ?? "").split(delimiter)) {
    if (folder !== "" && existsSync(join(folder, program))) return join(folder, program);
  }
  return undefined;
}

function requireTools() {
  const missing = [];
  if (which("cmake") === undefined) missing.push("cmake (apt-get install cmake)");
  if (which("git") === undefined) missing.push("git (apt-get install git)");
  if (!["c++", "g++", "clang++"].some((compiler) => which(compiler) !== undefined)) {
    missing.push("a C++ compiler (apt-get install g++)");
  }
  if (missing.length > 0) {
    throw new StepError(
      `building llama-server needs ${missing.join(", ")}; or pass --llama-server <path> to use a built one.`,
    );
  }
}

/** node-llama-cpp's folder: the project's own dependency, else the cache's copy (installed without its scripts). */
function nodeLlamaCpp(cache, { install }) {
  const candidates = [];
  try {
    candidates.push(
      dirname(createRequire(join(ROOT, "package.json")).resolve("node-llama-cpp/package.json")),
    );
  } catch {
    // not a dependency of the project
  }
  const cached = join(cache, "npm", "node_modules", "node-llama-cpp");
  candidates.push(cached);
  const found = candidates.find((folder) => existsSync(join(folder, "package.json")));
  if (found !== undefined) return found;
  if (!install) return undefined;
  mkdirSync(join(cache, "npm"), { recursive: true });
  log(
    `installing ${NODE_LLAMA_CPP} into ${join(cache, "npm")} (--ignore-scripts: no prebuilt binaries are fetched)`,
  );
  run("npm", [
    "install",
    "--prefix",
    join(cache, "npm"),
    "--ignore-scripts",
    "--no-audit",
    "--no-fund",
    NODE_LLAMA_CPP,
  ]);
  if (!existsSync(join(cached, "package.json")))
    throw new StepError(`npm did not install ${NODE_LLAMA_CPP} into ${cached}.`);
  return cached;
}

/** The llama.cpp git bundle the package ships, with its release tag. */
function llamaBundle(packageFolder) {
  const bundle = join(packageFolder, "llama", "gitRelease.bundle");
  if (!existsSync(bundle)) {
    throw new StepError(
      `${packageFolder} has no llama/gitRelease.bundle: this node-llama-cpp version does not ship llama.cpp's source.`,
    );
  }
  let tag = "unknown";
  try {
    tag = JSON.parse(readFileSync(join(packageFolder, "llama", "llama.cpp.info.json"), "utf8")).tag ?? tag;
  } catch {
    // the tag only names the source folder
  }
  const version = JSON.parse(readFileSync(join(packageFolder, "package.json"), "utf8")).version;
  return { bundle, tag, version };
}

function buildServer(cache, bundle, jobs) {
  const source = join(cache, `llama.cpp-${bundle.tag}`);
  const binary = join(source, "build", "bin", "llama-server");
  if (existsSync(binary)) {
    log(`using the llama-server built before: ${binary}`);
    return binary;
  }
  if (!existsSync(join(source, "CMakeLists.txt"))) {
    log(`cloning llama.cpp ${bundle.tag} from ${bundle.bundle}`);
    run("git", ["clone", "--quiet", bundle.bundle, source]);
  }
  log(`building llama-server with cmake (${jobs} jobs; this takes a while)`);
  run("cmake", [
    "-S",
    source,
    "-B",
    join(source, "build"),
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
  ]);
  run("cmake", [
    "--build",
    join(source, "build"),
    "--config",
    "Release",
    "--target",
    "llama-server",
    "-j",
    String(jobs),
  ]);
  if (!existsSync(binary)) throw new StepError(`the build finished but ${binary} is missing.`);
  return binary;
}

function run(command, args, extra = {}) {
  const result = spawnSync(command, args, { stdio: "inherit", ...extra });
  if (result.error) throw new StepError(`${command} failed to start: ${result.error.message}`);
  if (result.status !== 0)
    throw new StepError(`${command} ${args.join(" ")} exited with ${result.status ?? result.signal}.`);
}

function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}

async function startServer(binary, settings, cache) {
  const port = await freePort();
  const logFile = join(cache, "llama-server.log");
  const args = [
    "-m",
    settings.modelPath,
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
    "-c",
    String(settings.contextSize),
  ];
  if (settings.jinja) args.push("--jinja");
  log(`starting ${binary} ${args.join(" ")} (log: ${logFile})`);
  const out = openSync(logFile, "w");
  const child = spawn(binary, args, { stdio: ["ignore", out, out] });
  let exited;
  child.on("exit", (code, signal) => (exited = code ?? signal));
  const origin = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 600_000;
  while (Date.now() < deadline) {
    if (exited !== undefined)
      throw new StepError(`llama-server exited (${exited}) before it was healthy; see ${logFile}.`);
    try {
      const response = await fetch(`${origin}/health`, { signal: AbortSignal.timeout(2_000) });
      if (response.ok) return { child, baseUrl: `${origin}/v1` };
    } catch {
      // not listening yet
    }
    await new Promise((wake) => setTimeout(wake, 500));
  }
  child.kill();
  throw new StepError(`llama-server was not healthy after 10 minutes; see ${logFile}.`);
}

const AGENT_RUNS = [
  {
    name: "sphero",
    module: "examples/sphero/context.ts",
    task: "Roll the ball in a square, then show a smile on its face, and remember the square as a shape.",
  },
  {
    name: "todo",
    module: "examples/todo/context.ts",
    task: "Add 'buy milk' to my todo list, then tell me what is on it.",
  },
];

const EXIT_MEANING = {
  0: "answer",
  1: "error",
  3: "step limit (max-steps or max-consecutive-errors)",
  4: "truncated",
  5: "unclear-answer",
};

function runAgent(agentRun, baseUrl, maxSteps, scratch) {
  log(`moss agent ${agentRun.module} "${agentRun.task}"`);
  const result = spawnSync(
    process.execPath,
    [
      "--no-node-snapshot",
      join(ROOT, "bin", "moss.js"),
      "agent",
      agentRun.module,
      agentRun.task,
      "--base-url",
      baseUrl,
      "--model",
      "local",
      "--max-steps",
      String(maxSteps),
    ],
    {
      cwd: ROOT,
      stdio: "inherit",
      env: { ...process.env, MOSS_TODO_FILE: join(scratch, "todo.json"), OPENAI_API_KEY: "" },
    },
  );
  return result.status ?? 1;
}

function log(message) {
  process.stderr.write(`[test:llama] ${message}\n`);
}

async function main() {
  const settings = options();
  if (settings.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let binary = settings.serverPath;
  if (binary !== undefined && !existsSync(binary))
    throw new UsageError(`--llama-server ${binary} does not exist.`);
  if (binary === undefined) {
    requireTools();
    const folder = nodeLlamaCpp(settings.cache, { install: !settings.dryRun });
    if (folder === undefined) {
      log(
        `dry run: ${NODE_LLAMA_CPP} is not installed; a real run installs it into ${join(settings.cache, "npm")}.`,
      );
    } else {
      const bundle = llamaBundle(folder);
      log(`llama.cpp ${bundle.tag} from node-llama-cpp ${bundle.version}: ${bundle.bundle}`);
      if (settings.dryRun) {
        log(
          `dry run: would clone it into ${join(settings.cache, `llama.cpp-${bundle.tag}`)} and build llama-server with cmake.`,
        );
      } else {
        binary = buildServer(settings.cache, bundle, settings.jobs);
      }
    }
  }
  if (settings.dryRun) {
    log(
      `dry run: would start llama-server on 127.0.0.1 with ${settings.modelPath} (-c ${settings.contextSize}${settings.jinja ? ", --jinja" : ""}) and run: ${AGENT_RUNS.map((agentRun) => agentRun.name).join(", ")}.`,
    );
    return 0;
  }
  mkdirSync(settings.cache, { recursive: true });
  const { child, baseUrl } = await startServer(binary, settings, settings.cache);
  const scratch = mkdtempSync(join(tmpdir(), "moss-llama-"));
  const results = [];
  try {
    for (const agentRun of AGENT_RUNS)
      results.push([agentRun.name, runAgent(agentRun, baseUrl, settings.maxSteps, scratch)]);
  } finally {
    child.kill();
  }
  for (const [name, exit] of results) log(`${name}: exit ${exit} (${EXIT_MEANING[exit] ?? "unexpected"})`);
  return results.every(([, exit]) => exit in EXIT_MEANING && exit !== 1) ? 0 : 1;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error) => {
    if (error instanceof UsageError) {
      process.stderr.write(`test:llama: ${error.message}\n\n${USAGE}\n`);
      process.exitCode = 2;
    } else {
      process.stderr.write(`test:llama: ${error instanceof StepError ? error.message : error.stack}\n`);
      process.exitCode = 1;
    }
  },
);
