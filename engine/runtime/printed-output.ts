/** Most of what the model's code printed a runtime keeps, across executions. */
const MAX_CUMULATIVE_STDOUT = 1024 * 1024;

/** What the model's code printed on one runtime, across executions; past the bound the oldest output goes first. */
export class PrintedOutput {
  #outputs: string[] = [];
  #bytes = 0;

  /** Keeps what a run printed (ending in a newline). */
  record(text: string): void {
    if (!text) return;
    this.#outputs.push(text.endsWith("\n") ? text : `${text}\n`);
    this.#bytes += text.length;
    while (this.#bytes > MAX_CUMULATIVE_STDOUT && this.#outputs.length > 1) {
      this.#bytes -= this.#outputs.shift()!.length;
    }
  }

  /** Everything kept, in order. */
  text(): string {
    return this.#outputs.join("");
  }
}
