/**
 * The Sphero BOLT robot ball, as the MOSS protocol's own example describes it. `Ball` is the body you drive;
 * `LedMatrix` is its 8×8 LED face.
 */

/** One move of the ball: roll at a heading, or spin in place. */
export interface Move {
  kind: "roll" | "spin";
  /** Heading in degrees, 0 = forward, 90 = right. */
  heading: number;
  /** Speed from 0 to 255 (0 for a spin). */
  speed: number;
  /** Duration in seconds. */
  duration: number;
}

/** A function that rolls the ball: heading in degrees, speed 0–255, duration in seconds. */
export type RollFunc = (heading: number, speed: number, duration: number) => Promise<void>;

/** A sequence of faces shown one after another on the LED matrix. */
export interface Animation {
  /** Each frame is 8 strings of 8 characters: `#` lights a LED, `.` leaves it dark. */
  frames: string[][];
  /** Seconds each frame stays on. */
  frameDuration: number;
}

/** The ball's body. Every move is recorded, so you can read back what the ball did. */
export abstract class Ball {
  /**
   * Rolls at `heading` degrees (0 = forward, 90 = right) with `speed` 0–255 for `duration` seconds.
   * Resolves when the roll ends.
   */
  abstract roll(heading: number, speed: number, duration: number): Promise<void>;

  /**
   * Rolls at full speed (255) at `heading` degrees for `duration` seconds. At full speed the ball can knock things
   * over, so a person approves every sprint before it starts: the run waits for their answer.
   * @approval
   */
  abstract sprint(heading: number, duration: number): Promise<void>;

  /** Spins in place by `degrees` (positive = clockwise) over `duration` seconds. */
  abstract spin(degrees: number, duration: number): Promise<void>;

  /** Stops at once. */
  abstract stop(): void;

  /** The current heading in degrees, 0–359. */
  abstract heading(): number;

  /** The moves made so far, oldest first. */
  abstract history(): Move[];
}

/** The 8×8 LED face of the ball. Coordinates are 0–7, x to the right, y down. */
export interface LedMatrix {
  /** Lights (`on = true`) or darkens one LED. */
  set(x: number, y: number, on: boolean): void;
  /** Shows a whole face: 8 strings of 8 characters, `#` lit and `.` dark. */
  draw(rows: string[]): void;
  /** Darkens every LED. */
  clear(): void;
  /** The face as 8 lines of text, `#` lit and `.` dark. */
  render(): string;
  /** Plays an animation; resolves when it ends. */
  play(animation: Animation): Promise<void>;
}
