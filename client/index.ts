// moss-ts/client: the Crewmaster protocol over `moss serve`'s native API, for Node and browsers (fetch only).

export type {
  AnswerEvent,
  RunTrace,
  SessionEvent,
  Thread,
  ThreadPrompt,
  ThreadSession,
  TraceExecution,
} from "../engine/server/protocol.ts";
export type { HostCallRecord } from "../engine/types.ts";
export {
  AnsweredClarifications,
  type AnsweredRequest,
  type ApprovalPayload,
  answersRequest,
  type ClarificationPayload,
  type QuestionPayload,
} from "./answered-clarifications.ts";
export { type EventConfig, FormatType, MomentType, ScopeType } from "./event-config.ts";
export type {
  AnswerMessage,
  ClarificationMessage,
  CodeMessage,
  ErrorMessage,
  ExecutionMessage,
  PublishedMessage,
  TextMessage,
} from "./published-message.ts";
export { RequestHandler, type RequestHandlerOptions, type ThreadMessage } from "./request-handler.ts";
export { type PluginPort, ResponseStreamHandler } from "./response-stream-handler.ts";
