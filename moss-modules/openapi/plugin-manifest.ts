import { jsonErrorOffset } from "../../engine/context/json-error-offset.ts";
import { OpenApiLoadError } from "./errors.ts";

/** How a plugin authenticates (`plugin.json` `auth`): fixed header, query-parameter or cookie values, or OIDC. */
export interface PluginAuth {
  type: "header" | "param" | "cookie" | "oidc";
  /** Names and values; a value written `${NAME}` is read from the environment variable NAME when the call is made. */
  args: Record<string, string>;
}

/** `plugin.json` of an EulerCopilot-style plugin folder. */
export interface PluginManifest {
  /** The plugin's id (lower-case letters and symbols); defaults to the folder name. */
  id: string;
  /** A short display name. */
  name: string;
  /** What the plugin does, its input and output: shown to the model. */
  description: string;
  predefinedQuestion?: string;
  automaticFlow: boolean;
  auth?: PluginAuth;
}

const AUTH_TYPES = ["header", "param", "cookie", "oidc"] as const;

/** Parses and checks `plugin.json`; problems name the file and the field. */
export function parsePluginManifest(text: string, file: string, folderName: string): PluginManifest {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new OpenApiLoadError(`${file}:${jsonErrorPosition(text)} - ${(error as Error).message}`);
  }
  if (!isRecord(value)) throw new OpenApiLoadError(`${file}:1:1 - plugin.json must be an object`);
  const field = (name: string, problem: string) => new OpenApiLoadError(`${file} - "${name}" ${problem}`);
  const optionalString = (name: string): string | undefined => {
    const item = value[name];
    if (item === undefined) return undefined;
    if (typeof item !== "string") throw field(name, `must be a string, got ${JSON.stringify(item)}`);
    return item;
  };
  const id = optionalString("id") ?? folderName;
  if (!/^[a-z][a-z0-9_.-]*$/.test(id))
    throw field("id", `must be lower-case letters, digits and _.- (got ${JSON.stringify(id)})`);
  const manifest: PluginManifest = {
    id,
    name: optionalString("name") ?? id,
    description: optionalString("description") ?? "",
    automaticFlow: value.automatic_flow === true,
  };
  const question = optionalString("predefined_question");
  if (question !== undefined) manifest.predefinedQuestion = question;
  if (value.automatic_flow !== undefined && typeof value.automatic_flow !== "boolean")
    throw field("automatic_flow", "must be true or false");
  const auth = value.auth;
  if (auth !== undefined) {
    if (!isRecord(auth)) throw field("auth", "must be an object { type, args }");
    if (!AUTH_TYPES.includes(auth.type as never))
      throw field("auth.type", `must be one of ${AUTH_TYPES.join(", ")} (got ${JSON.stringify(auth.type)})`);
    const args = auth.args ?? {};
    if (!isRecord(args) || Object.values(args).some((item) => typeof item !== "string"))
      throw field("auth.args", "must be an object of string values");
    manifest.auth = { type: auth.type as PluginAuth["type"], args: args as Record<string, string> };
  }
  return manifest;
}

function jsonErrorPosition(text: string): string {
  const offset = jsonErrorOffset(text);
  if (offset === undefined) return "1:1";
  const before = text.slice(0, offset).split("\n");
  return `${before.length}:${before[before.length - 1]!.length + 1}`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
