import { Moss as Parent } from "moss-ts";
import { type Animation, Ball, type LedMatrix, type Move, type RollFunc } from "./bolt.ts";

/**
 * You drive a Sphero BOLT: a robot ball with an 8×8 LED face. `moss.body` moves it, `moss.face` draws on it.
 * Data fields of `moss` (like `moss.shapes`) are kept between your turns.
 */
export class Moss extends Parent {
  /** The ball's body. */
  body!: Ball;
  /** The ball's LED face. */
  face!: LedMatrix;
  /** Shapes you have learned to roll, by name; kept between turns. */
  shapes: Record<string, Move[]> = {};
  /** How many turns have run. */
  turns = 0;
}

/** Rolls `body` along a regular polygon with `sides` sides of `seconds` each, e.g. `polygon(moss.body, 4, 1)`. */
export async function polygon(body: Ball, sides: number, seconds: number): Promise<void> {
  await rollPath((heading, speed, duration) => body.roll(heading, speed, duration), sides, seconds);
}

/** Rolls a path of `sides` equal legs with any roll function (host code only: functions do not cross into the sandbox). */
async function rollPath(roll: RollFunc, sides: number, seconds: number): Promise<void> {
  for (let side = 0; side < sides; side++) await roll((360 / sides) * side, 120, seconds);
}

/** A smiling face, ready for `moss.face.draw(SMILE)`. */
export const SMILE: string[] = [
  "........",
  "..#..#..",
  "..#..#..",
  "........",
  ".#....#.",
  "..####..",
  "........",
  "........",
];

/** A heart that beats twice. */
export const HEARTBEAT: Animation = {
  frames: [
    ["........", ".##.##..", "#######.", "#######.", ".#####..", "..###...", "...#....", "........"],
    ["........", "........", "..#.#...", ".#####..", "..###...", "...#....", "........", "........"],
  ],
  frameDuration: 0.25,
};

// <moss-hide>
import type { MossCompiler } from "moss-ts";
import { SimulatedBall, SimulatedLedMatrix } from "./simulated-bolt.ts";

/** Binds the simulated ball unless the host bound a real one. */
export function __moss_compile__(compiler: MossCompiler): void {
  const container = compiler.container();
  if (!container.bound(Ball)) compiler.bind(Ball, new SimulatedBall());
  if (!container.bound("LedMatrix")) compiler.bind("LedMatrix", new SimulatedLedMatrix());
}

/** Test cases `moss test` runs: each target gets its own runtime. */
export const __moss_test_cases__ = [
  "testSquare",
  {
    name: "remembers a shape",
    code: "async function main(moss: Moss) { moss.shapes.dot = []; return Object.keys(moss.shapes); }",
  },
  {
    name: "a too-fast roll is refused",
    code: "async function main(moss: Moss) { await moss.body.roll(0, 999, 1); }",
    expectError: { kind: "runtime", message: /speed must be between 0 and 255/ },
  },
  {
    name: "a typo does not type-check",
    code: "async function main(moss: Moss) { moss.body.spn(90, 1); }",
    expectError: "type",
  },
];

export async function testSquare(moss: Moss): Promise<Move[]> {
  await polygon(moss.body, 4, 1);
  return moss.body.history();
}
// </moss-hide>
