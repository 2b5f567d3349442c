// MossContext: the persisted state of a session, its typed encoding and its stores. Every export is named here.
export {
  parseContextText,
  readContextFile,
  type WriteContextReport,
  writeContextFile,
  writeFileAtomically,
} from "./context-file.ts";
export type { ContextStore } from "./context-store.ts";
export { createContext, joinContexts } from "./create-context.ts";
export {
  type DecodePropertiesOptions,
  decodeProperties,
  type EncodedProperties,
  type EncodePropertiesOptions,
  encodeProperties,
} from "./encode-properties.ts";
export { FileContextStore, type LockOwner, lockContextFile, validSessionId } from "./file-context-store.ts";
export { expandedSizeProblem, measureValue } from "./measure-value.ts";
export { type PartitionedProperties, partitionProperties } from "./partition-properties.ts";
export { validateContext } from "./validate-context.ts";
export {
  CONTEXT_VERSION,
  contextVersion,
  type EncodedWireProperties,
  type EncodeWirePropertiesOptions,
  encodeWireProperties,
  isWireDocument,
  type WireDocument,
  wireDocument,
} from "./wire-properties.ts";
