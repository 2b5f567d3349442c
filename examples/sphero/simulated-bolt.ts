import { type Animation, Ball, type LedMatrix, type Move } from "./bolt.ts";

/** A simulated BOLT body: records moves and keeps a heading; time is simulated, not slept. */
export class SimulatedBall extends Ball {
  #heading = 0;
  readonly #moves: Move[] = [];

  async roll(heading: number, speed: number, duration: number): Promise<void> {
    assertNumber("heading", heading);
    assertRange("speed", speed, 0, 255);
    assertRange("duration", duration, 0, 60);
    this.#heading = normalize(heading);
    this.#moves.push({ kind: "roll", heading: this.#heading, speed, duration });
  }

  async sprint(heading: number, duration: number): Promise<void> {
    await this.roll(heading, 255, duration);
  }

  async spin(degrees: number, duration: number): Promise<void> {
    assertNumber("degrees", degrees);
    assertRange("duration", duration, 0, 60);
    this.#heading = normalize(this.#heading + degrees);
    this.#moves.push({ kind: "spin", heading: this.#heading, speed: 0, duration });
  }

  stop(): void {
    this.#moves.push({ kind: "roll", heading: this.#heading, speed: 0, duration: 0 });
  }

  heading(): number {
    return this.#heading;
  }

  history(): Move[] {
    return this.#moves.map((move) => ({ ...move }));
  }
}

/** A simulated 8×8 LED face, rendered as text. */
export class SimulatedLedMatrix implements LedMatrix {
  #leds: boolean[][] = blank();
  readonly frames: string[] = [];

  set(x: number, y: number, on: boolean): void {
    assertRange("x", x, 0, 7);
    assertRange("y", y, 0, 7);
    this.#leds[y]![x] = on;
  }

  draw(rows: string[]): void {
    if (rows.length !== 8 || rows.some((row) => row.length !== 8)) {
      throw new RangeError("draw() needs 8 rows of 8 characters ('#' lit, '.' dark)");
    }
    this.#leds = rows.map((row) => [...row].map((cell) => cell === "#"));
  }

  clear(): void {
    this.#leds = blank();
  }

  render(): string {
    return this.#leds.map((row) => row.map((on) => (on ? "#" : ".")).join("")).join("\n");
  }

  async play(animation: Animation): Promise<void> {
    for (const frame of animation.frames) {
      this.draw(frame);
      this.frames.push(this.render());
    }
  }
}

function blank(): boolean[][] {
  return Array.from({ length: 8 }, () => Array.from({ length: 8 }, () => false));
}

function normalize(degrees: number): number {
  return ((Math.round(degrees) % 360) + 360) % 360;
}

function assertNumber(name: string, value: number): void {
  if (typeof value !== "number" || !Number.isFinite(value))
    throw new TypeError(`${name} must be a finite number, got ${value}`);
}

function assertRange(name: string, value: number, min: number, max: number): void {
  assertNumber(name, value);
  if (value < min || value > max)
    throw new RangeError(`${name} must be between ${min} and ${max}, got ${value}`);
}
