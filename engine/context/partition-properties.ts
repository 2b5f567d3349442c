/** Stored properties split into the module's declared data fields and the rest. */
export interface PartitionedProperties {
  declared: Record<string, unknown>;
  /** Fields the module no longer declares: a context keeps them on every save and never loads them. */
  undeclared: Record<string, unknown>;
}

/**
 * Splits a context's properties by the module's data fields. The undeclared ones are kept on every save, so a field
 * removed from the module and added back later finds its value again; they never reach the model's `moss`.
 */
export function partitionProperties(
  properties: Record<string, unknown>,
  declaredFields: readonly string[],
): PartitionedProperties {
  const known = new Set(declaredFields);
  const declared: Record<string, unknown> = {};
  const undeclared: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(properties)) {
    if (known.has(name)) declared[name] = value;
    else undeclared[name] = value;
  }
  return { declared, undeclared };
}
