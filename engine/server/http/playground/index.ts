// The playground: one page at `/` (index.html) and its script (playground.js, bundled on first request), a browser
// client of the native API served by `moss serve` itself.
export { registerPlayground } from "./playground-route.ts";
