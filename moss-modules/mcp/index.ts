// moss-ts/mcp: MCP servers (stdio or streamable HTTP) as typed services of a context module.
export { type BindMcpOptions, bindMcp, type McpBinding, mcpService } from "./bind-mcp.ts";
export {
  MCP_CONTENT_DECLARATION,
  type McpMethod,
  type McpServerInfo,
  mcpDeclaration,
  mcpMethods,
} from "./mcp-declaration.ts";
export {
  connectMcp,
  createMcpService,
  MAX_TOOL_PAGES,
  MAX_TOOLS,
  type McpCallOptions,
  type McpConnection,
  type McpHttpServer,
  type McpServer,
  type McpStdioServer,
  McpToolError,
} from "./mcp-service.ts";
