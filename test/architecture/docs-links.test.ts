import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, test } from "vitest";

/*
 * The README is the front door and docs/ holds the rest (issue 25): every relative link in them, and in
 * ARCHITECTURE.md, must lead somewhere — a file that exists and, with a `#fragment`, a heading of that page.
 */

const ROOT = path.resolve(import.meta.dirname, "../..");

function markdownFiles(): string[] {
  const files = ["README.md", "ARCHITECTURE.md"];
  const walk = (folder: string) => {
    for (const entry of readdirSync(path.join(ROOT, folder), { withFileTypes: true })) {
      const relative = path.join(folder, entry.name);
      if (entry.isDirectory()) walk(relative);
      else if (entry.name.endsWith(".md")) files.push(relative);
    }
  };
  walk("docs");
  return files;
}

/** The text outside fenced code blocks and inline code spans, where a `[text](target)` is a link. */
function prose(markdown: string): string {
  let inFence = false;
  return markdown
    .split("\n")
    .map((line) => {
      if (/^\s*(```|~~~)/.test(line)) {
        inFence = !inFence;
        return "";
      }
      return inFence ? "" : line.replace(/`[^`]*`/g, "``");
    })
    .join("\n");
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  let inFence = false;
  for (const line of markdown.split("\n")) {
    if (/^\s*(```|~~~)/.test(line)) inFence = !inFence;
    const heading = inFence ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = (heading[1] ?? "")
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    result.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return result;
}

function links(markdown: string): string[] {
  return [...prose(markdown).matchAll(/\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map(
    (match) => match[1] ?? "",
  );
}

describe("the documentation's links", () => {
  test("the README is a front door of at most 250 lines that links every page of docs/", () => {
    const readme = readFileSync(path.join(ROOT, "README.md"), "utf8");
    expect(readme.split("\n").length).toBeLessThanOrEqual(250);
    const linked = new Set(links(readme).map((target) => target.split("#")[0]));
    const pages = markdownFiles().filter((file) => /^docs\/[^/]+\.md$/.test(file));
    expect(pages.length).toBeGreaterThanOrEqual(10);
    for (const page of pages) expect(linked, `README.md does not link ${page}`).toContain(page);
  });

  for (const file of markdownFiles()) {
    test(`every relative link of ${file} leads to a file and heading that exist`, () => {
      const text = readFileSync(path.join(ROOT, file), "utf8");
      const broken: string[] = [];
      for (const target of links(text)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: …
        const [pathPart, fragment] = target.split("#", 2) as [string, string | undefined];
        const resolved =
          pathPart === ""
            ? path.join(ROOT, file)
            : path.resolve(path.dirname(path.join(ROOT, file)), pathPart);
        if (!resolved.startsWith(ROOT) || !existsSync(resolved)) {
          broken.push(`${target}: no such file`);
          continue;
        }
        if (fragment !== undefined && statSync(resolved).isFile() && resolved.endsWith(".md")) {
          if (!anchors(readFileSync(resolved, "utf8")).has(decodeURIComponent(fragment)))
            broken.push(`${target}: no heading with that anchor`);
        }
      }
      expect(broken, `${file} has broken links`).toEqual([]);
    });
  }

  test("the link checker itself sees a broken link and a broken anchor", () => {
    expect(links("see [a](docs/x.md#y) and `[b](c)`\n```\n[d](e)\n```\n")).toEqual(["docs/x.md#y"]);
    expect(anchors("## The native API v1\n## `moss.config.yaml`\n## A: b\n## A: b")).toEqual(
      new Set(["the-native-api-v1", "mossconfigyaml", "a-b", "a-b-1"]),
    );
  });
});
