/** How many times a run may be taken over from a lost worker before it fails without running again. */
export const DEFAULT_MAX_TAKEOVERS = 3;
