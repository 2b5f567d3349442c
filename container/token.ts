/** What a binding is keyed by: a class or abstract class (the usual case), a string, or a symbol. */
export type Token<T = unknown> = (abstract new (...args: any[]) => T) | string | symbol;

/** A readable name for a token, for error messages: the class name, a quoted string, or `Symbol(description)`. */
export function tokenName(token: Token): string {
  if (typeof token === "function") return token.name === "" ? "<anonymous class>" : token.name;
  if (typeof token === "string") return JSON.stringify(token);
  return token.toString();
}
