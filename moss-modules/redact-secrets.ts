// The one secret redactor lives in the engine (`moss serve` redacts what a tenant reads with it too).
export { MIN_SECRET_LENGTH, REDACTED, SecretRedactor } from "../engine/membrane/host/secret-redactor.ts";
