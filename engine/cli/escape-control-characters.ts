/**
 * Control characters a terminal acts on: C0 (but tab and newline), DEL, C1 (0x9b is an 8-bit CSI), and the Unicode
 * bidirectional overrides and isolates that reorder what a person reads on the line.
 */
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * Text the model or its code controls (stdout, questions, choices, error messages, code) made safe to print on a
 * terminal: every control character is shown as a visible escape (`\x1b`, `\r`, `\u202e`), so no output can clear the
 * screen, move the cursor, set the window title, write the clipboard (OSC 52) or overwrite the line above it.
 * Tabs and newlines stay. Every CLI printer passes untrusted text through this one function.
 */
export function escapeControlCharacters(text: string): string {
  return text.replace(CONTROL, (character) => {
    const code = character.charCodeAt(0);
    if (character === "\r") return "\\r";
    if (character === "\b") return "\\b";
    if (character === "\f") return "\\f";
    if (character === "\v") return "\\v";
    return code <= 0xff
      ? `\\x${code.toString(16).padStart(2, "0")}`
      : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}
