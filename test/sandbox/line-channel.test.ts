import { PassThrough } from "node:stream";
import { describe, expect, test } from "vitest";
import { FRAME_MIN_CHARS, LineChannel } from "../../engine/sandbox/line-channel.ts";

// The control channel between the host and a sandbox process (issue 17): a long wire text travels as a raw frame
// after its message's line instead of escaped inside it; what arrives must be exactly what was sent, and a message
// a (hostile) sandbox process garbles is refused clearly, never half taken.

/** A channel that reads what it writes, with what it received and refused. */
function loopback(options: { frames?: boolean } = {}) {
  const stream = new PassThrough();
  const received: unknown[] = [];
  const refused: Error[] = [];
  const channel = new LineChannel<unknown, unknown>(stream, (message) => received.push(message), {
    ...options,
    onInvalid: (error) => refused.push(error),
  });
  return { stream, channel, received, refused };
}

/** Writes raw text in pieces of `size` characters, then lets the stream deliver it. */
async function writeInPieces(stream: PassThrough, text: string, size: number): Promise<void> {
  const bytes = Buffer.from(text);
  for (let offset = 0; offset < bytes.length; offset += size)
    stream.write(bytes.subarray(offset, offset + size));
  await new Promise((resolve) => setImmediate(resolve));
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("LineChannel frames", () => {
  test("long strings arrive exactly as sent, multi-byte characters and quotes included", async () => {
    const { stream, channel, received, refused } = loopback({ frames: true });
    const wire = JSON.stringify(
      Array.from({ length: 4000 }, (_, i) => ({ i, text: `é "q" \\ 😀 ${i}\n`, tags: ["a", "b"] })),
    );
    expect(wire.length).toBeGreaterThan(FRAME_MIN_CHARS);
    const lines: string[] = [];
    stream.on("data", (chunk: string) => lines.push(chunk));
    const messages = [
      { type: "result", result: { mossData: wire, returns: '["short"]', again: wire } },
      { type: "small", value: 1 },
      { type: "settle", wire: `${wire}x`, list: [wire, "short", { nested: wire }] },
    ];
    for (const message of messages) channel.send(message);
    await settle();
    expect(refused).toEqual([]);
    expect(received).toEqual(messages);
    // The long text is not escaped into a line: it follows the line raw.
    expect(lines.join("")).toContain(wire);
  });

  test("a message split into pieces at any byte arrives whole", async () => {
    const sender = new PassThrough();
    const wire = "ü😀".repeat(FRAME_MIN_CHARS);
    const message = { type: "result", result: { mossData: wire } };
    const text: string[] = [];
    sender.setEncoding("utf8");
    sender.on("data", (chunk: string) => text.push(chunk));
    new LineChannel<unknown, unknown>(sender, () => {}, { frames: true }).send(message);
    await settle();
    const whole = text.join("");
    expect(whole.startsWith("#")).toBe(true);
    for (const size of [1, 7, 4096, 65536]) {
      const { stream, received, refused } = loopback({ frames: true });
      await writeInPieces(stream, whole + whole, size);
      expect(refused).toEqual([]);
      expect(received).toEqual([message, message]);
    }
  });

  test("a string with a lone surrogate stays inside its line (UTF-8 could not carry it)", async () => {
    const { stream, channel, received } = loopback({ frames: true });
    const lone = `${"x".repeat(FRAME_MIN_CHARS)}\ud800`;
    const lines: string[] = [];
    stream.on("data", (chunk: string) => lines.push(chunk));
    channel.send({ value: lone });
    await settle();
    expect(received).toEqual([{ value: lone }]);
    expect(lines.join("").startsWith("{")).toBe(true);
  });

  test("a framed line announcing no frames is its message; the next line follows at once", async () => {
    const { stream, received, refused } = loopback({ frames: true });
    await writeInPieces(stream, '#{"message":{"a":1},"frames":[]}\n{"b":2}\n', 5);
    expect(refused).toEqual([]);
    expect(received).toEqual([{ a: 1 }, { b: 2 }]);
  });

  test("without frames every message is one JSON line", async () => {
    const { stream, channel, received } = loopback();
    const lines: string[] = [];
    stream.on("data", (chunk: string) => lines.push(chunk));
    const message = { wire: "y".repeat(FRAME_MIN_CHARS * 2) };
    channel.send(message);
    await settle();
    expect(received).toEqual([message]);
    expect(lines.join("")).toBe(`${JSON.stringify(message)}\n`);
  });

  test.each([
    ["a line that is not JSON", "{not json\n"],
    ["a framed line without lengths", '#{"message":{}}\n'],
    ["a negative frame length", '#{"message":{},"frames":[-1]}\n'],
    ["a fractional frame length", '#{"message":{},"frames":[1.5]}\nab'],
    ["frames announcing more than a channel carries", `#{"message":{},"frames":[${2 ** 40}]}\n`],
    ["a placeholder naming no frame", '#{"message":{"a":{"\\u0000frame":3}},"frames":[2]}\nab'],
    [
      "two placeholders naming one frame",
      '#{"message":[{"\\u0000frame":0},{"\\u0000frame":0}],"frames":[2]}\nab',
    ],
    ["a frame no placeholder names", '#{"message":{},"frames":[2]}\nab'],
    ["a placeholder with other keys", '#{"message":{"\\u0000frame":0,"x":1},"frames":[2]}\nab'],
  ])("%s is refused clearly, and nothing after it is taken", async (_name, text) => {
    const { stream, received, refused } = loopback({ frames: true });
    await writeInPieces(stream, `${text}{"after":1}\n`, 3);
    expect(received).toEqual([]);
    expect(refused).toHaveLength(1);
    expect(refused[0]!.message).toMatch(/^a message on the channel is not valid: /);
  });
});
