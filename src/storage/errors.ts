/**
 * StorageError is fatal for the node (as a Storage error is in etcd): the runtime logs it and
 * exits rather than run on a disk whose state it no longer knows. Restart then rebuilds from
 * what the disk holds, or refuses to start when that is damaged.
 */
import { TickraftError, type ErrorDetails } from '../base/errors.js';

export type StorageErrorCode =
  /** A record that does not decode, a gap in a log, an out-of-range hard state, a stray key. */
  | 'STORAGE_CORRUPT'
  /** LevelDB failed to open, read or write (locked, disk full, I/O error). */
  | 'STORAGE_IO'
  /** The directory holds a database this code does not know how to read. */
  | 'STORAGE_UNSUPPORTED_FORMAT';

export class StorageError extends TickraftError {
  override readonly name = 'StorageError';
  declare readonly code: StorageErrorCode;

  constructor(
    code: StorageErrorCode,
    message: string,
    options: { cause?: unknown; details?: ErrorDetails } = {},
  ) {
    super(code, message, options);
  }
}
