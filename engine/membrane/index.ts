// The membrane's front door: what crosses between model code and the host (see ARCHITECTURE.md).

export {
  ISOLATE_SCRIPT_BUILD,
  ISOLATE_SCRIPT_FILE,
  ISOLATE_SCRIPT_GLOBAL,
  isolateClosureSource,
  isolateScript,
} from "./isolate-script.ts";
export {
  CALL_SITE_COLUMNS,
  type CallbackOperation,
  type CallReply,
  callSiteOf,
  type HandleKind,
  type HandleOperation,
  type HandleShape,
  type HostMembrane,
  type HostOperation,
  type HostOutcome,
  type SandboxEnvelope,
  type SettledOutcome,
  stdoutTruncationMarker,
} from "./protocol.ts";
export {
  isReachableMember,
  isReachableName,
  type MemberDeclaration,
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
