/** Which messages a request publishes: only the answer, clarifications and errors, or everything. */
export const ScopeType = { Answer: "answer", Full: "full" } as const;
/** Which messages a request publishes: only the answer, clarifications and errors, or everything. */
export type ScopeType = (typeof ScopeType)[keyof typeof ScopeType];

/** When a text message is published: when it starts, for each piece the model streams, when it is whole. */
export const MomentType = { Start: "start", Delta: "delta", End: "end" } as const;
/** When a text message is published: when it starts, for each piece the model streams, when it is whole. */
export type MomentType = (typeof MomentType)[keyof typeof MomentType];

/** How much a published message carries: the protocol's fields only, or also the server's details. */
export const FormatType = { Compact: "compact", Verbose: "verbose" } as const;
/** How much a published message carries: the protocol's fields only, or also the server's details. */
export type FormatType = (typeof FormatType)[keyof typeof FormatType];

/** What a {@link RequestHandler} publishes; every field is optional. */
export interface EventConfig {
  /** Default {@link ScopeType.Full}. */
  scope?: ScopeType;
  /** Default `[MomentType.Start, MomentType.End]`. */
  moments?: MomentType[];
  /** Default {@link FormatType.Compact}. */
  format?: FormatType;
}

/** An {@link EventConfig} with its defaults filled in. */
export interface ResolvedEventConfig {
  scope: ScopeType;
  moments: ReadonlySet<MomentType>;
  format: FormatType;
}

/** Fills in the defaults of `config` and names the first field that is not one of its values. */
export function resolveEventConfig(config: EventConfig = {}): ResolvedEventConfig {
  const scope = config.scope ?? ScopeType.Full;
  const format = config.format ?? FormatType.Compact;
  const moments = config.moments ?? [MomentType.Start, MomentType.End];
  const check = (name: string, value: unknown, allowed: Record<string, string>) => {
    if (!Object.values(allowed).includes(value as string)) {
      throw new TypeError(
        `eventConfig.${name} must be one of ${Object.values(allowed)
          .map((item) => `"${item}"`)
          .join(", ")}, got ${JSON.stringify(value)}.`,
      );
    }
  };
  check("scope", scope, ScopeType);
  check("format", format, FormatType);
  if (!Array.isArray(moments))
    throw new TypeError("eventConfig.moments must be an array of MomentType values.");
  for (const moment of moments) check("moments[]", moment, MomentType);
  return { scope, moments: new Set(moments), format };
}
