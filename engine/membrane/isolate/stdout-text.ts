// Stdout text by UTF-8 bytes: the byte count of a line and its cut at a byte budget.
import { ReflectApply, StringCharCodeAt } from "../wire/intrinsics.ts";
import { slice } from "./records.ts";

export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const code = ReflectApply(StringCharCodeAt, text, [i]);
    if (code < 0x80) bytes += 1;
    else if (code < 0x800) bytes += 2;
    else if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
      bytes += 4;
      i++;
    } else bytes += 3;
  }
  return bytes;
}

export function truncateToBytes(text: string, budget: number): string {
  let bytes = 0;
  let end = 0;
  while (end < text.length) {
    const code = ReflectApply(StringCharCodeAt, text, [end]);
    const pair = code >= 0xd800 && code <= 0xdbff && end + 1 < text.length;
    const size = code < 0x80 ? 1 : code < 0x800 ? 2 : pair ? 4 : 3;
    if (bytes + size > budget) break;
    bytes += size;
    end += pair ? 2 : 1;
  }
  return slice(text, 0, end);
}
