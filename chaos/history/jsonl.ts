/**
 * History files: append-only JSON lines. Each record is one write(2) on a file opened with
 * O_APPEND, done synchronously, so the file holds every record the writer returned from, in the
 * order written, even if the process is killed right after; at worst the record being written
 * when the process died is torn, and the reader drops it (codec.ts). Each writing process (driver,
 * sink, nemesis runner) should have its own file; the checker reads them together.
 */
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { encodeRecord, parseHistoryText } from './codec.js';
import type { HistoryRecord } from './format.js';

export class HistoryWriter {
  private fd: number | undefined;
  private written = 0;

  /** Opens (creating if needed) `path` for appending; existing records are kept. */
  constructor(readonly path: string) {
    this.fd = openSync(path, 'a');
  }

  /** Appends one record; returns once the kernel has it (a process crash then cannot lose it). */
  append(record: HistoryRecord): void {
    if (this.fd === undefined) throw new Error(`history ${this.path} is closed`);
    const bytes = Buffer.from(encodeRecord(record), 'utf8');
    let offset = 0;
    while (offset < bytes.length) offset += writeSync(this.fd, bytes, offset);
    this.written++;
  }

  get recordCount(): number {
    return this.written;
  }

  close(): void {
    if (this.fd === undefined) return;
    closeSync(this.fd);
    this.fd = undefined;
  }
}

export interface ReadHistory {
  readonly records: HistoryRecord[];
  /** Files whose torn last line was dropped. */
  readonly tornFiles: readonly string[];
}

/** Reads and concatenates history files (the checker orders records by time itself). */
export function readHistoryFiles(paths: readonly string[]): ReadHistory {
  const records: HistoryRecord[] = [];
  const tornFiles: string[] = [];
  for (const path of paths) {
    const parsed = parseHistoryText(readFileSync(path, 'utf8'), path);
    for (const r of parsed.records) records.push(r);
    if (parsed.tornTail !== undefined) tornFiles.push(path);
  }
  return { records, tornFiles };
}
