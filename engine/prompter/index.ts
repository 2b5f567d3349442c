// The prompter: renders a compiled module as the prompt the model reads. Every export is named here.
export {
  ATTRIBUTES_HEADING,
  type AttributeEntry,
  MAX_TRANSITIVE_TYPES,
  MODULE_LINE_PREFIX,
  MODULE_SOURCE_HEADING,
  MossPrompter,
} from "./moss-prompter.ts";
export { renderDeclaration } from "./render-declaration.ts";
