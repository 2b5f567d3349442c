/** A type bomb: conditional types mapped over a union of ten thousand template literals (seconds, hundreds of MiB). */
export function typeBomb(copies: number): string {
  const lines = [
    "type Digit = 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9;",
    `type Two = \`\${Digit}\${Digit}\`;`,
    `type Four = \`\${Two}\${Two}\`;`,
  ];
  for (let index = 0; index < copies; index++) {
    lines.push(`type Split${index}<T> = T extends \`\${infer A}\${infer B}\` ? [A, B, T, ${index}] : never;`);
    lines.push(`const probe${index}: Split${index}<Four> = 0 as unknown as string;`);
  }
  return lines.join("\n");
}
