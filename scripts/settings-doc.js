// `node scripts/settings-doc.js`: writes docs/reference/settings.md from the settings table (engine/cli/settings.ts),
// the one place each setting of `moss serve`, `moss worker` and `moss agent` is written. `--check` writes nothing and
// fails when the committed page differs from the table (test/cli/settings.test.ts checks the same).
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { tsImport } from "tsx/esm/api";

const page = fileURLToPath(new URL("../docs/reference/settings.md", import.meta.url));
const { settingsReference } = await tsImport("../engine/cli/settings.ts", import.meta.url);
const text = settingsReference();

if (process.argv.includes("--check")) {
  let committed = "";
  try {
    committed = readFileSync(page, "utf8");
  } catch {}
  if (committed !== text) {
    console.error(
      "docs/reference/settings.md differs from engine/cli/settings.ts: run node scripts/settings-doc.js",
    );
    process.exit(1);
  }
  console.log("docs/reference/settings.md matches the settings table");
} else {
  writeFileSync(page, text);
  console.log("wrote docs/reference/settings.md");
}
