import { fencedBlocks } from "../fenced-code.ts";

const ANNOUNCES_MORE =
  /^(?:let me(?! know)|let's|let us|i will|i'll|i am going to|i'm going to|now,? i|next,? i|first,? i)\b/i;

/**
 * Why an answer without code is not a clear final answer, or undefined when it is one: an empty answer, one
 * with code blocks in another language, or one that announces a next step (ends with a colon, or its last line
 * starts "Let me", "I'll", …) did not finish the task.
 */
export function unclearAnswer(content: string): string | undefined {
  const text = content.trim();
  if (text === "") return "was empty";
  const block = fencedBlocks(text)[0];
  if (block !== undefined) {
    return `held a ${block.language ? `\`${block.language}\` ` : ""}code block but no TypeScript \`main(moss)\` that could run`;
  }
  const lastLine = text.split("\n").at(-1)!.trim();
  if (/[:：]$/.test(text) || /(?:\.\.\.|…)$/.test(text) || ANNOUNCES_MORE.test(lastLine)) {
    return "announced a next step but held no code to run";
  }
  return undefined;
}
