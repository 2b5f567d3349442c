/**
 * How a property key reads in a path (`.name`, or `["other key"]`): one rule for every message that names a field
 * of a context's properties, whether the context layer (encoding, decoding) or the module's declared types (a
 * field that does not fit) wrote it.
 */
export function propertyAccess(key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}
