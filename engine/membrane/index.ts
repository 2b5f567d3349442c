// The membrane's front door: what crosses between model code and the host (see ARCHITECTURE.md).

export {
  addHostRoot,
  HOST_PATH_MARKER,
  type HostErrorFields,
  hostErrorFields,
  hostErrorWire,
  MAX_ERROR_FIELDS_BYTES,
  redactErrorValues,
  redactHostPaths,
  redactHostRoots,
  writtenStrings,
} from "./host/host-error.ts";
export {
  DEFAULT_MAX_EXPANDED_BYTES,
  type DecodeWireOptions,
  decodeWire,
  describeUnsupported,
  type EncodeWireFieldsOptions,
  type EncodeWireOptions,
  encodeWire,
  encodeWireFields,
  joinWireRecord,
  joinWireRecords,
  measureWire,
  type SplitWireRecordOptions,
  splitWireRecord,
  WIRE_MAX_BIGINT_DIGITS,
  WIRE_MAX_DEPTH,
  WIRE_TEXT_SLACK,
} from "./host/host-wire.ts";
export {
  answerInOrder,
  type BatchedCall,
  batchedCallOf,
  callMembrane,
  checkBatch,
  type HostCall,
  hostCallOf,
  parseBatch,
} from "./host/membrane-call.ts";
export {
  MIN_SECRET_LENGTH,
  REDACTED,
  SecretRedactor,
  type SecretRedactorOptions,
} from "./host/secret-redactor.ts";
export {
  ISOLATE_SCRIPT_BUILD,
  ISOLATE_SCRIPT_FILE,
  ISOLATE_SCRIPT_GLOBAL,
  isolateClosureSource,
  isolateScript,
} from "./isolate-script.ts";
export {
  CALL_SITE_COLUMNS,
  CALL_SITE_OUTSIDE,
  CALL_SITE_PROBE,
  CALL_SITE_UNREADABLE,
  type CallbackOperation,
  type CallReply,
  callSiteOf,
  type HandleKind,
  type HandleOperation,
  type HandleShape,
  type HostBatchBridge,
  type HostCallBridge,
  type HostMembrane,
  type HostOperation,
  type HostOutcome,
  type SandboxEnvelope,
  type SettledOutcome,
  stdoutTruncationMarker,
  unknownCallSiteReason,
} from "./protocol.ts";
export {
  isMossOwnMember,
  isReachableGlobalName,
  isReachableMember,
  isReachableMossMember,
  isReachableName,
  type MemberDeclaration,
  MOSS_NAME_PREFIX,
  MOSS_OWN_MEMBERS,
  type MossMemberDeclaration,
  type MossOwnMember,
  NEVER_REACHED_NAMES,
} from "./visibility.ts";
export {
  createWireCodec,
  type WireCodec,
  type WireDecodeOptions,
  type WireEncodeOptions,
  type WireFieldsOptions,
  type WireUnsupported,
} from "./wire/codec.ts";
export { type BinaryConstructor, binaryConstructors } from "./wire/intrinsics.ts";
