/** What model code sees where a secret was. */
export const REDACTED = "[redacted]";

/** Secrets shorter than this are not redacted: they would match ordinary text everywhere. */
export const MIN_SECRET_LENGTH = 4;

/** Deepest nesting walked value by value; deeper parts are redacted as JSON text. */
const MAX_WALK_DEPTH = 100;

/** How many times an escaped text is decoded again (`%2561` is `a` after two) before it is searched. */
const MAX_DECODE_LAYERS = 3;

/** How many encodings inside an encoded run (base64 of base64, …) are looked through. */
const MAX_RUN_DEPTH = 2;

/** One escape a decoder undoes: percent (either hex case), `\u`, `\u{}`, `\x`, `\/`-style, character references. */
const ESCAPE =
  /%([0-9a-fA-F]{2})|\\u\{([0-9a-fA-F]{1,6})\}|\\u([0-9a-fA-F]{4})|\\x([0-9a-fA-F]{2})|\\([^A-Za-z0-9\s])|&#[xX]([0-9a-fA-F]{1,6});?|&#([0-9]{1,7});?|&(amp|lt|gt|quot|apos);/g;

const ESCAPE_OR_PLUS = new RegExp(`${ESCAPE.source}|\\+`, "g");

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

/** A run of base64, base64url or hex text. */
const ENCODED_RUN = /[A-Za-z0-9+/_-]+={0,2}/g;

/** Most secrets of this process's redactors a follower also redacts (the newest: fetched tokens are renewed). */
const MAX_PROCESS_SECRETS = 1024;
/** Every secret the redactors of this process hold (the bindings'), newest last, for redactors that follow them. */
const processSecrets = new Set<string>();
let processSecretsVersion = 0;

/** Options of a {@link SecretRedactor}. */
export interface SecretRedactorOptions {
  /**
   * Also redacts every secret the other redactors of this process hold (the OpenAPI and MCP bindings' credentials),
   * those added later too; its own secrets stay its own. `moss serve` redacts what a tenant reads with one.
   */
  processSecrets?: boolean;
}

/**
 * The one redactor of the bindings' secrets (OpenAPI credentials, MCP headers and stdio `env`): it removes every
 * secret from what model code can receive, in every spelling that decodes to it. The text is decoded the way a
 * decoder model code can call would (percent-encoding in either hex case, also repeated; `+` for a space; JSON and
 * JavaScript `\u`/`\x`/`\/` escapes; HTML/XML character references and entities), up to three times, and searched
 * at each step; runs of base64, base64url and hex are decoded and dropped whole when they hold a secret; binary
 * bodies are searched byte by byte (UTF-8 and UTF-16 forms). What matched is replaced in the text as received.
 */
export class SecretRedactor {
  readonly #secrets = new Set<string>();
  /** This redactor's own secrets, when it follows the process's (see {@link SecretRedactorOptions}). */
  readonly #own: Set<string> | undefined;
  #seenVersion = -1;
  /** Each secret as the strings it can appear as once decoded: itself, its UTF-8 and UTF-16 bytes as latin1. */
  #forms: string[] = [];
  #formBytes: Buffer[] = [];
  #shortestBytes = Number.POSITIVE_INFINITY;
  #hasSpace = false;

  constructor(options: SecretRedactorOptions = {}) {
    this.#own = options.processSecrets === true ? new Set() : undefined;
  }

  /** Adds a secret; returns the value, for use in an expression. */
  add(value: string): string {
    if (value.length < MIN_SECRET_LENGTH) return value;
    if (this.#own !== undefined) {
      this.#own.add(value);
    } else if (!processSecrets.has(value)) {
      processSecrets.add(value);
      if (processSecrets.size > MAX_PROCESS_SECRETS)
        processSecrets.delete(processSecrets.values().next().value!);
      processSecretsVersion++;
    }
    this.#addForms(value);
    return value;
  }

  /** A follower takes in the process's secrets added since it last looked (the whole set again when some left). */
  #follow(): void {
    if (this.#own === undefined || this.#seenVersion === processSecretsVersion) return;
    this.#seenVersion = processSecretsVersion;
    if ([...this.#secrets].some((secret) => !this.#own!.has(secret) && !processSecrets.has(secret))) {
      this.#secrets.clear();
      this.#forms = [];
      this.#formBytes = [];
      this.#shortestBytes = Number.POSITIVE_INFINITY;
      this.#hasSpace = false;
      for (const secret of this.#own) this.#addForms(secret);
    }
    for (const secret of processSecrets) this.#addForms(secret);
  }

  #addForms(value: string): void {
    if (this.#secrets.has(value)) return;
    this.#secrets.add(value);
    const utf8 = Buffer.from(value, "utf8");
    const wide = Buffer.from(value, "utf16le");
    const forms = new Set([
      value,
      utf8.toString("latin1"),
      wide.toString("latin1"),
      Buffer.from(wide).swap16().toString("latin1"),
    ]);
    this.#forms = [...new Set([...this.#forms, ...forms])].sort((a, b) => b.length - a.length);
    this.#formBytes = this.#forms.map((form) => Buffer.from(form, "latin1"));
    this.#shortestBytes = Math.min(this.#shortestBytes, utf8.byteLength);
    if (value.includes(" ")) this.#hasSpace = true;
  }

  /** Whether no secret is known. */
  get empty(): boolean {
    this.#follow();
    return this.#secrets.size === 0;
  }

  /** `text` with every secret, in any spelling, replaced by `[redacted]`. */
  redactText(text: string): string {
    this.#follow();
    if (this.#secrets.size === 0 || text.length < MIN_SECRET_LENGTH) return text;
    return replaceRanges(text, this.#ranges(text, 0));
  }

  /**
   * `bytes` with every secret replaced, the same array if none: read as UTF-16 (either byte order and alignment,
   * where the bytes hold NULs) and then as latin1, so that UTF-8, UTF-16 and every spelling `redactText` knows match.
   */
  redactBytes(bytes: Uint8Array): Uint8Array {
    this.#follow();
    if (this.#secrets.size === 0 || bytes.byteLength < MIN_SECRET_LENGTH) return bytes;
    let current = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (current.includes(0)) {
      for (const bigEndian of [false, true]) {
        for (const offset of [0, 1]) current = this.#redactWide(current, offset, bigEndian);
      }
    }
    const text = current.toString("latin1");
    const ranges = this.#ranges(text, 0);
    if (ranges.length === 0 && current.buffer === bytes.buffer && current.byteOffset === bytes.byteOffset)
      return bytes;
    return new Uint8Array(Buffer.from(replaceRanges(text, ranges), "latin1"));
  }

  /** `bytes` with the secrets found in their UTF-16 reading (from `offset`) replaced by UTF-16 `[redacted]`. */
  #redactWide(bytes: Buffer, offset: number, bigEndian: boolean): Buffer {
    const length = bytes.byteLength - offset - ((bytes.byteLength - offset) % 2);
    if (length < MIN_SECRET_LENGTH * 2) return bytes;
    const slice = Buffer.from(bytes.subarray(offset, offset + length));
    if (bigEndian) slice.swap16();
    const text = slice.toString("utf16le");
    const ranges = this.#ranges(text, 0);
    if (ranges.length === 0) return bytes;
    const replaced = Buffer.from(replaceRanges(text, ranges), "utf16le");
    if (bigEndian) replaced.swap16();
    return Buffer.concat([bytes.subarray(0, offset), replaced, bytes.subarray(offset + length)]);
  }

  /**
   * A copy of `value` without secrets: strings and byte arrays redacted, arrays and plain objects walked (keys too),
   * a number whose digits hold a secret replaced by `[redacted]`.
   */
  redactValue(value: unknown): unknown {
    this.#follow();
    if (this.#secrets.size === 0) return value;
    return this.#value(value, 0);
  }

  /** The same error (a copy) with its message and every data field free of secrets; its stack is not kept. */
  redactError<T>(error: T): T {
    this.#follow();
    if (this.#secrets.size === 0 || !(error instanceof Error)) return error;
    const copy = Object.create(Object.getPrototypeOf(error) as object) as Error;
    for (const key of Reflect.ownKeys(error)) {
      if (key === "stack" || key === "cause") continue;
      const descriptor = Object.getOwnPropertyDescriptor(error, key)!;
      if ("value" in descriptor) descriptor.value = this.#value(descriptor.value, 0);
      Object.defineProperty(copy, key, descriptor);
    }
    Object.defineProperty(copy, "stack", {
      value: `${copy.name}: ${copy.message}`,
      configurable: true,
      writable: true,
    });
    return copy as T;
  }

  #value(value: unknown, depth: number): unknown {
    if (typeof value === "string") return this.redactText(value);
    if (typeof value === "number" || typeof value === "bigint") {
      const text = String(value);
      return this.redactText(text) === text ? value : REDACTED;
    }
    if (value instanceof Uint8Array) return this.redactBytes(value);
    if (value instanceof ArrayBuffer) {
      const redacted = this.redactBytes(new Uint8Array(value));
      return redacted.byteLength === value.byteLength && redacted.buffer === value ? value : redacted.buffer;
    }
    if (typeof value !== "object" || value === null) return value;
    if (depth > MAX_WALK_DEPTH) return this.#deepValue(value);
    if (Array.isArray(value)) return value.map((item) => this.#value(item, depth + 1));
    const prototype = Object.getPrototypeOf(value);
    if (prototype !== Object.prototype && prototype !== null) return value;
    const copy: Record<string, unknown> = prototype === null ? Object.create(null) : {};
    for (const [key, item] of Object.entries(value))
      copy[this.redactText(key)] = this.#value(item, depth + 1);
    return copy;
  }

  /** A subtree too deep to walk: redacted as its JSON text (the same redaction), then read back. */
  #deepValue(value: object): unknown {
    let text: string | undefined;
    try {
      text = JSON.stringify(value);
    } catch {
      return REDACTED;
    }
    if (text === undefined) return value;
    const redacted = this.redactText(text);
    if (redacted === text) return value;
    try {
      return JSON.parse(redacted) as unknown;
    } catch {
      return redacted;
    }
  }

  /** The ranges of `text` that are, or decode to, a secret. */
  #ranges(text: string, runDepth: number): Array<[number, number]> {
    const ranges = this.#search(text, runDepth, false);
    // `+` is a space only to a form decoder, and only in the text as received: a second chain for it.
    if (this.#hasSpace && text.includes("+")) ranges.push(...this.#search(text, runDepth, true));
    return ranges;
  }

  #search(text: string, runDepth: number, plusIsSpace: boolean): Array<[number, number]> {
    const ranges: Array<[number, number]> = [];
    let layer = text;
    let origin: Int32Array | undefined;
    const toRaw = (index: number): number => (origin ? origin[index]! : index);
    for (let depth = 0; ; depth++) {
      if (!plusIsSpace || depth > 0) {
        for (const form of this.#forms) {
          for (let at = layer.indexOf(form); at !== -1; at = layer.indexOf(form, at + 1))
            ranges.push([toRaw(at), toRaw(at + form.length)]);
        }
        if (runDepth < MAX_RUN_DEPTH) {
          const minimum = Math.ceil((this.#shortestBytes * 4) / 3);
          for (const match of layer.matchAll(ENCODED_RUN)) {
            if (match[0].length >= minimum && this.#runHoldsSecret(match[0], runDepth))
              ranges.push([toRaw(match.index), toRaw(match.index + match[0].length)]);
          }
        }
      }
      if (depth >= MAX_DECODE_LAYERS) break;
      const decoded = decodeEscapes(layer, plusIsSpace && depth === 0);
      if (decoded === undefined) break;
      const previous = origin;
      layer = decoded.text;
      origin = previous ? decoded.origin.map((index) => previous[index]!) : decoded.origin;
    }
    return ranges;
  }

  #runHoldsSecret(run: string, runDepth: number): boolean {
    const decodings: Buffer[] = [];
    for (let offset = 0; offset < 4 && offset < run.length; offset++)
      decodings.push(Buffer.from(run.slice(offset), "base64"));
    if (/^[0-9a-fA-F]+$/.test(run)) {
      decodings.push(Buffer.from(run.slice(run.length % 2), "hex"));
      decodings.push(Buffer.from(run.slice(1 - (run.length % 2)), "hex"));
    }
    for (const decoded of decodings) {
      if (decoded.byteLength < this.#shortestBytes) continue;
      if (this.#formBytes.some((form) => decoded.includes(form))) return true;
      if (this.#ranges(decoded.toString("latin1"), runDepth + 1).length > 0) return true;
    }
    return false;
  }
}

/** `text` with one layer of escapes undone, and where each decoded character starts in `text`; undefined if none. */
function decodeEscapes(text: string, plusIsSpace: boolean): { text: string; origin: Int32Array } | undefined {
  const pattern = plusIsSpace ? ESCAPE_OR_PLUS : ESCAPE;
  pattern.lastIndex = 0;
  if (!pattern.test(text)) return undefined;
  pattern.lastIndex = 0;
  const parts: string[] = [];
  const origin: number[] = [];
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    const start = match.index;
    for (let index = last; index < start; index++) origin.push(index);
    parts.push(text.slice(last, start));
    const [, percent, braced, unicode, hex, escaped, reference, decimal, entity] = match;
    let decoded: string;
    if (match[0] === "+") decoded = " ";
    else if (percent !== undefined) decoded = String.fromCharCode(Number.parseInt(percent, 16));
    else if (unicode !== undefined) decoded = String.fromCharCode(Number.parseInt(unicode, 16));
    else if (hex !== undefined) decoded = String.fromCharCode(Number.parseInt(hex, 16));
    else if (escaped !== undefined) decoded = escaped;
    else if (entity !== undefined) decoded = ENTITIES[entity]!;
    else {
      const point = Number.parseInt((braced ?? reference ?? decimal)!, (braced ?? reference) ? 16 : 10);
      decoded = point <= 0x10ffff ? String.fromCodePoint(point) : match[0];
    }
    for (let index = 0; index < decoded.length; index++) origin.push(start);
    parts.push(decoded);
    last = start + match[0].length;
  }
  for (let index = last; index <= text.length; index++) origin.push(index);
  parts.push(text.slice(last));
  return { text: parts.join(""), origin: Int32Array.from(origin) };
}

/** `text` with the given ranges (any order, overlapping) replaced by `[redacted]`. */
function replaceRanges(text: string, ranges: Array<[number, number]>): string {
  if (ranges.length === 0) return text;
  ranges.sort((a, b) => a[0] - b[0]);
  const parts: string[] = [];
  let last = 0;
  for (const [start, end] of ranges) {
    if (end <= last) continue;
    if (start >= last) {
      parts.push(text.slice(last, start), REDACTED);
    }
    last = end;
  }
  parts.push(text.slice(last));
  return parts.join("");
}
