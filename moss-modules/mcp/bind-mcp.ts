import type { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { MossError } from "../../engine/errors.ts";
import { SchemaTooLargeError } from "../openapi/schema-to-type.ts";
import { writeIfChanged } from "../openapi/write-if-changed.ts";
import { mcpDeclaration, mcpMethods } from "./mcp-declaration.ts";
import { connectMcp, createMcpService, type McpCallOptions, type McpServer } from "./mcp-service.ts";

/** Options of `bindMcp` / `mcpService`. */
export interface BindMcpOptions extends McpCallOptions {
  /** Where the generated declaration is written (a `.ts` file the context module imports with `import type`). */
  typesFile: string;
  /** Only these tools (by MCP name) become methods; default all. */
  tools?: readonly string[];
}

/** An MCP server as a service, with its generated declaration. */
export interface McpBinding {
  name: string;
  /** The host object to bind; its `onDestroy` closes the connection. */
  service: object & { onDestroy(): Promise<void> };
  declaration: string;
  typesFile: string;
  /** Whether the tool list changed since the file was last written. */
  changed: boolean;
  /** Tool names in the order declared. */
  tools: string[];
}

/**
 * Connects to an MCP server, reads its tool list, writes the TypeScript declaration to `typesFile` and returns the
 * service. Call it before `compile()`; a changed tool list changes the declaration, and so the prompt, on that
 * compile. The connection is closed when the runtime closes (the service's `onDestroy`).
 */
export async function mcpService(
  name: string,
  server: McpServer,
  options: BindMcpOptions,
): Promise<McpBinding> {
  if (!/^[A-Z][A-Za-z0-9]*$/.test(name))
    throw new TypeError(`the service name must be a PascalCase identifier (got ${JSON.stringify(name)})`);
  const connection = await connectMcp(server, options);
  try {
    const wanted = options.tools ? new Set(options.tools) : undefined;
    const methods = mcpMethods(connection.tools.filter((tool) => !wanted || wanted.has(tool.name)));
    let declaration: string;
    try {
      declaration = mcpDeclaration(name, methods, connection.server);
    } catch (error) {
      if (!(error instanceof SchemaTooLargeError)) throw error;
      const tool = (error as SchemaTooLargeError & { tool?: string }).tool;
      throw new MossError(
        "schema-too-large",
        `${connection.label}: tool "${tool ?? "?"}": ${error.message}`,
        { tool, refs: error.refs },
        { cause: error },
      );
    }
    const changed = await writeIfChanged(options.typesFile, declaration);
    const service = createMcpService(connection, methods, options);
    return {
      name,
      service,
      declaration,
      typesFile: options.typesFile,
      changed,
      tools: methods.map((method) => method.tool.name),
    };
  } catch (error) {
    await connection.close().catch(() => {});
    throw error;
  }
}

/** `mcpService`, then binds the service to `name` in the compiler's container (`moss.memory!: Memory`). */
export async function bindMcp(
  compiler: MossCompiler,
  name: string,
  server: McpServer,
  options: BindMcpOptions,
): Promise<McpBinding> {
  const binding = await mcpService(name, server, options);
  compiler.bind(name, binding.service);
  return binding;
}
