// The project's Markdown tables render as tables a reader can scan: in README.md and docs/*.md,
// every row of a table has its header's number of cells, and no cell holds more than a short
// paragraph. A whole reference crammed into one cell (docs/API.md's services table once held
// every AdminService method in one 1,700-character cell) renders as one huge row.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MAX_CELL_CHARS = 300;

const files = ['README.md', ...readdirSync(`${ROOT}docs`).map((f) => `docs/${f}`)].filter((f) =>
  f.endsWith('.md'),
);

/** The cells of a table row: split on pipes that are not escaped or inside `code`. */
function cells(line: string): string[] {
  const out: string[] = [];
  let cur = '';
  let code = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (ch === '`') code = !code;
    if (ch === '\\' && line[i + 1] === '|') {
      cur += '|';
      i++;
    } else if (ch === '|' && !code) {
      out.push(cur.trim());
      cur = '';
    } else cur += ch;
  }
  out.push(cur.trim());
  return out.slice(1, -1);
}

for (const file of files) {
  t.test(file, (t) => {
    const lines = readFileSync(`${ROOT}${file}`, 'utf8').split('\n');
    let fenced = false;
    let header: number | undefined;
    let tables = 0;
    lines.forEach((line, i) => {
      if (line.startsWith('```')) fenced = !fenced;
      if (fenced || !line.startsWith('|')) {
        header = undefined;
        return;
      }
      const row = cells(line);
      // The delimiter row (| --- | :-: |) is as wide as the widest cell: nothing of its own.
      if (/^[\s|:-]+$/.test(line)) return;
      if (header === undefined) {
        header = row.length;
        tables++;
      } else if (row.length !== header) {
        t.fail(`${file}:${i + 1}: ${row.length} cells, the header has ${header}`);
      }
      for (const c of row)
        if (c.length > MAX_CELL_CHARS)
          t.fail(`${file}:${i + 1}: a cell of ${c.length} characters: "${c.slice(0, 60)}…"`);
    });
    t.pass(`${tables} table(s) checked`);
    t.end();
  });
}
