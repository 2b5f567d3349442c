// A user's script: plain node, no loader, no close of anything. It must end by itself.
import { MossCompiler } from "moss-ts";

const runtime = await new MossCompiler().compile("context.ts");
const plain = await runtime.execute({
  code: 'async function main(moss: Moss) { moss.greeted.push("ada"); return hello("ada"); }',
});
const logged = await runtime.execute({
  code: 'async function main(moss: Moss) { console.log(hello("bob")); return moss.greeted.length; }',
});
const summary = ({ ok, returns, stdout, error }) => ({ ok, returns, stdout, error: error?.message });
console.log(JSON.stringify({ plain: summary(plain), logged: summary(logged) }));
