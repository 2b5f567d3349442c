const HEX_DIGIT = /^[0-9a-fA-F]$/;

/**
 * The offset of the first JSON syntax error in `text` (strict RFC 8259), or undefined when it is valid JSON.
 * V8's `JSON.parse` messages omit the position for some errors ("Unexpected token"); this finds it.
 */
export function jsonErrorOffset(text: string): number | undefined {
  let index = 0;
  const fail = (): never => {
    throw new JsonSyntaxAt(index);
  };
  const skipWhitespace = (): void => {
    while (index < text.length && " \t\n\r".includes(text[index]!)) index++;
  };
  const parseString = (): void => {
    index++;
    for (;;) {
      const character = text[index];
      if (character === undefined || character < " ") fail();
      if (character === '"') {
        index++;
        return;
      }
      if (character === "\\") {
        index++;
        const escaped = text[index];
        if (escaped === "u") {
          index++;
          for (let digit = 0; digit < 4; digit++, index++) if (!HEX_DIGIT.test(text[index] ?? "")) fail();
        } else if (escaped !== undefined && '"\\/bfnrt'.includes(escaped)) index++;
        else fail();
      } else index++;
    }
  };
  const skipDigits = (): void => {
    if (!isDigit(text[index])) fail();
    while (isDigit(text[index])) index++;
  };
  const parseNumber = (): void => {
    if (text[index] === "-") index++;
    if (text[index] === "0") index++;
    else skipDigits();
    if (text[index] === ".") {
      index++;
      skipDigits();
    }
    if (text[index] === "e" || text[index] === "E") {
      index++;
      if (text[index] === "+" || text[index] === "-") index++;
      skipDigits();
    }
  };
  const parseValue = (): void => {
    skipWhitespace();
    const character = text[index];
    if (character === "{") {
      index++;
      skipWhitespace();
      if (text[index] === "}") {
        index++;
        return;
      }
      for (;;) {
        skipWhitespace();
        if (text[index] !== '"') fail();
        parseString();
        skipWhitespace();
        if (text[index] !== ":") fail();
        index++;
        parseValue();
        skipWhitespace();
        if (text[index] === ",") index++;
        else if (text[index] === "}") {
          index++;
          return;
        } else fail();
      }
    }
    if (character === "[") {
      index++;
      skipWhitespace();
      if (text[index] === "]") {
        index++;
        return;
      }
      for (;;) {
        parseValue();
        skipWhitespace();
        if (text[index] === ",") index++;
        else if (text[index] === "]") {
          index++;
          return;
        } else fail();
      }
    }
    if (character === '"') {
      parseString();
      return;
    }
    if (character === "-" || isDigit(character)) {
      parseNumber();
      return;
    }
    for (const word of ["true", "false", "null"]) {
      if (text.startsWith(word, index)) {
        index += word.length;
        return;
      }
    }
    fail();
  };
  try {
    parseValue();
    skipWhitespace();
    return index < text.length ? index : undefined;
  } catch (error) {
    if (error instanceof JsonSyntaxAt) return error.offset;
    throw error;
  }
}

class JsonSyntaxAt {
  constructor(readonly offset: number) {}
}

function isDigit(character: string | undefined): boolean {
  return character !== undefined && character >= "0" && character <= "9";
}
