/*
 * unsynced-shim: an LD_PRELOAD library that records, for the files of one directory, what a
 * power failure could not take away. The power-loss test (test/integration/power-loss.test.ts)
 * loads it into a child process that writes to a real node store (LevelDB), kills the child with
 * SIGKILL, and then rebuilds the directory from this record (test/power-loss/power-loss.ts):
 * each file keeps only the bytes it had when it was last fsynced, and only the names that some
 * fsync made durable. A plain kill -9 cannot show a write acknowledged without fsync, because
 * the page cache survives the process; this record is what lets the test drop that cache.
 *
 * Environment (the shim does nothing when UNSYNCED_SHIM_DIR is unset):
 *   UNSYNCED_SHIM_DIR    the watched directory: an absolute path without "." or ".." parts and
 *                        no trailing slash; only the files directly in it are tracked.
 *   UNSYNCED_SHIM_STATE  a directory on the same file system, with an empty "inodes"
 *                        subdirectory. The shim appends to STATE/journal and hard-links every
 *                        file it sees created in the watched directory as STATE/inodes/<inode>,
 *                        so the content of a file stays readable after a rename or unlink.
 *
 * The journal has one line per event, appended with one write(2) each, in the order the events
 * happened (a mutex orders them across threads). Lines starting with '#' are comments. Indexes
 * count the other lines from 0. Inode numbers are decimal, names are relative to the directory.
 *   C <ino> <name>                  a file was created (open or fopen that made it)
 *   T <ino> <name> <saved>          an existing file was truncated to 0 by an open ("w", O_TRUNC);
 *                                   what it held just before is in STATE/inodes/<saved> ("-":
 *                                   it was empty), since a power failure before the truncation
 *                                   is durable leaves that content (LevelDB reuses the number of
 *                                   a table file a compaction wrote but did not install)
 *   R <ino> <old> <new>             a rename inside the directory (replacing <new> if it existed)
 *   U <ino> <name>                  an unlink
 *   S <ino> <size> <covers>         fsync/fdatasync of a file succeeded: its first <size> bytes
 *                                   (its size when the call began) are durable, and so is every
 *                                   line with an index below <covers> (those written before the
 *                                   call began)
 *   D <covers>                      fsync of the watched directory itself succeeded
 *   X <what>                        something the model cannot represent happened (a sync(2),
 *                                   a truncate or fallocate of a tracked file, a nested
 *                                   directory, a file the shim did not see created...): the
 *                                   power-loss step refuses the run rather than guess
 *
 * Intercepted: open, open64, openat, openat64, creat, creat64, fopen, fopen64 (creation and
 * truncation), fsync, fdatasync (durability points), rename, renameat, renameat2, unlink,
 * unlinkat, remove (names), and, to report them as X: sync, syncfs, sync_file_range, truncate,
 * truncate64, ftruncate, ftruncate64, fallocate, fallocate64, posix_fallocate,
 * posix_fallocate64, link, linkat, symlink, symlinkat, mkdir, mkdirat, rmdir.
 * sync_file_range is reported rather than counted as a sync: it writes data pages but neither
 * the file's size nor any metadata (sync_file_range(2)), so it makes nothing durable.
 * msync is not intercepted: LevelDB 1.20 (classic-level 3) maps files read-only (PROT_READ) and
 * writes through stdio, so no data of the store can reach the disk through a mapping.
 * Only calls made through the dynamic symbol table are seen: a call inside libc (stdio's own
 * write, glibc's remove calling unlink) is not, which is why fopen and remove are hooked
 * themselves. The data writes are not intercepted at all: the model only needs each file's size
 * at its syncs, and assumes (as LevelDB does) that files are written by appending, never by
 * rewriting bytes already synced.
 *
 * Build: cc -shared -fPIC -O2 -o unsynced-shim.so unsynced-shim.c -ldl -lpthread
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static int active = 0;
static char watched[PATH_MAX];
static size_t watched_len = 0;
static dev_t watched_dev;
static ino_t watched_ino;
static int journal_fd = -1;
static int inodes_fd = -1;
/* Lines written to the journal (not counting comments). */
static unsigned long long lines = 0;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void fatal(const char *what) {
  char buf[PATH_MAX + 128];
  int n = snprintf(buf, sizeof buf, "unsynced-shim: %s (errno %d)\n", what, errno);
  if (n > 0) {
    ssize_t ignored = write(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    (void)ignored;
  }
  abort();
}

#define REAL(name)                                                                      \
  static __typeof__(&name) real_##name = NULL;                                          \
  if (real_##name == NULL) {                                                            \
    real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name);                           \
    if (real_##name == NULL) fatal("dlsym(" #name ") found nothing");                   \
  }

static void write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fatal("writing the journal failed");
    buf += n;
    len -= (size_t)n;
  }
}

/* Appends one line; the caller holds mu. Comments ("#...") are not counted. */
static void journal(const char *fmt, ...) {
  char buf[2 * PATH_MAX + 256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof buf - 1) fatal("journal line too long");
  buf[n++] = '\n';
  write_all(journal_fd, buf, (size_t)n);
  if (buf[0] != '#') lines++;
}

__attribute__((constructor)) static void shim_init(void) {
  const char *dir = getenv("UNSYNCED_SHIM_DIR");
  const char *state = getenv("UNSYNCED_SHIM_STATE");
  if (dir == NULL) return;
  if (state == NULL) fatal("UNSYNCED_SHIM_DIR is set but UNSYNCED_SHIM_STATE is not");
  size_t len = strlen(dir);
  if (dir[0] != '/' || len < 2 || len >= sizeof watched - 1 || dir[len - 1] == '/' ||
      strstr(dir, "//") != NULL || strstr(dir, "/./") != NULL || strstr(dir, "/../") != NULL)
    fatal("UNSYNCED_SHIM_DIR must be a plain absolute path");
  memcpy(watched, dir, len + 1);
  watched_len = len;
  struct stat st;
  if (stat(watched, &st) != 0 || !S_ISDIR(st.st_mode)) fatal("UNSYNCED_SHIM_DIR is not a directory");
  watched_dev = st.st_dev;
  watched_ino = st.st_ino;
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/journal", state) >= (int)sizeof path) fatal("state path too long");
  journal_fd = (int)open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (journal_fd < 0) fatal("cannot open the journal");
  if (snprintf(path, sizeof path, "%s/inodes", state) >= (int)sizeof path) fatal("state path too long");
  inodes_fd = (int)open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (inodes_fd < 0) fatal("cannot open the inodes directory");
  if (fstat(inodes_fd, &st) != 0 || st.st_dev != watched_dev)
    fatal("UNSYNCED_SHIM_STATE is not on the watched directory's file system");
  journal("# unsynced-shim pid %ld dir %s", (long)getpid(), watched);
  active = 1;
}

/*
 * Whether `path` (relative to dirfd) names something under the watched directory. Returns 0 when
 * it does not, 1 when it is a file directly in it (its name is copied to `name`), 2 when it is
 * the directory itself, 3 when it is under it in a form the model does not handle (a nested
 * path, "." or "..", a name with a space or newline).
 */
static int classify(int dirfd, const char *path, char name[PATH_MAX]) {
  char abs[PATH_MAX];
  const char *p = path;
  if (path == NULL) return 0;
  if (path[0] != '/') {
    char base[PATH_MAX];
    if (dirfd == AT_FDCWD) {
      if (getcwd(base, sizeof base) == NULL) return 0;
    } else {
      char link[64];
      snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
      ssize_t n = readlink(link, base, sizeof base - 1);
      if (n <= 0) return 0;
      base[n] = '\0';
    }
    if (snprintf(abs, sizeof abs, "%s/%s", base, path) >= (int)sizeof abs) return 0;
    p = abs;
  }
  if (strncmp(p, watched, watched_len) != 0) return 0;
  const char *rest = p + watched_len;
  if (rest[0] == '\0') return 2;
  if (rest[0] != '/') return 0; /* a sibling such as "<dir>-other" */
  rest++;
  while (rest[0] == '/') rest++;
  if (rest[0] == '\0') return 2;
  if (strchr(rest, '/') != NULL || strcmp(rest, ".") == 0 || strcmp(rest, "..") == 0 ||
      strpbrk(rest, " \n\t") != NULL)
    return 3;
  strncpy(name, rest, PATH_MAX - 1);
  name[PATH_MAX - 1] = '\0';
  return 1;
}

/* Whether the inode has a link in STATE/inodes (the shim saw it created). */
static int tracked(ino_t ino) {
  char key[32];
  struct stat st;
  snprintf(key, sizeof key, "%llu", (unsigned long long)ino);
  return fstatat(inodes_fd, key, &st, 0) == 0 && st.st_ino == ino;
}

/* Whether an open descriptor is a regular file the shim tracks. */
static int tracked_fd(int fd, struct stat *st) {
  return fstat(fd, st) == 0 && S_ISREG(st->st_mode) && st->st_dev == watched_dev &&
         tracked(st->st_ino);
}

/* Whether an open descriptor refers to something under the watched directory (by its path). */
static int fd_in_dir(int fd) {
  char link[64];
  char target[PATH_MAX];
  char name[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return 0;
  target[n] = '\0';
  return classify(AT_FDCWD, target, name) != 0;
}

/*
 * Before an open that truncates an existing file (mu held): copies what it holds to
 * STATE/inodes/<ino>.t<line>, the line its T record will have. Writes the copy's name, or "-"
 * when there is nothing to keep, to `saved`.
 */
static void save_before_truncation(const struct stat *before, char saved[64]) {
  strcpy(saved, "-");
  if (!S_ISREG(before->st_mode) || before->st_size == 0 || !tracked(before->st_ino)) return;
  char key[32];
  snprintf(key, sizeof key, "%llu", (unsigned long long)before->st_ino);
  snprintf(saved, 64, "%llu.t%llu", (unsigned long long)before->st_ino, lines);
  REAL(openat);
  int in = real_openat(inodes_fd, key, O_RDONLY | O_CLOEXEC, 0);
  int out = real_openat(inodes_fd, saved, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (in < 0 || out < 0) fatal("cannot copy a file before its truncation");
  char buf[65536];
  for (;;) {
    ssize_t n = read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fatal("reading a file before its truncation failed");
    if (n == 0) break;
    write_all(out, buf, (size_t)n);
  }
  close(in);
  close(out);
}

/*
 * After an open that may have created or truncated `name` (mu held): records it, and links a new
 * file into STATE/inodes so that its content outlives renames and unlinks. `saved`: the copy
 * made by save_before_truncation when the open truncated an existing file, else NULL.
 */
static void opened(int fd, const char *name, int existed, const char *saved) {
  struct stat st;
  if (fstat(fd, &st) != 0) fatal("fstat after open failed");
  if (!S_ISREG(st.st_mode)) {
    journal("X open of %s, which is not a regular file", name);
    return;
  }
  if (!existed) {
    char key[32];
    snprintf(key, sizeof key, "%llu", (unsigned long long)st.st_ino);
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", watched, name) >= (int)sizeof path) fatal("path too long");
    if (linkat(AT_FDCWD, path, inodes_fd, key, 0) != 0) fatal("linking a new file into STATE/inodes failed");
    journal("C %llu %s", (unsigned long long)st.st_ino, name);
    return;
  }
  if (!tracked(st.st_ino)) {
    journal("X %s was opened for writing but the shim never saw it created", name);
    return;
  }
  if (saved != NULL) journal("T %llu %s %s", (unsigned long long)st.st_ino, name, saved);
}

/* open/openat and friends: `how` is the open flags. */
static int open_common(int dirfd, const char *path, int flags, mode_t mode,
                       int (*call)(int, const char *, int, mode_t)) {
  char name[PATH_MAX];
  int kind = active ? classify(dirfd, path, name) : 0;
  int writes = (flags & (O_CREAT | O_TRUNC)) != 0 || (flags & O_TMPFILE) == O_TMPFILE;
  if (kind == 0 || !writes) return call(dirfd, path, flags, mode);
  pthread_mutex_lock(&mu);
  int fd;
  if (kind != 1 || (flags & O_TMPFILE) == O_TMPFILE) {
    fd = call(dirfd, path, flags, mode);
    int saved = errno;
    journal("X open for writing of %s in an unsupported form", path);
    errno = saved;
  } else {
    struct stat before;
    int existed = fstatat(dirfd, path, &before, AT_SYMLINK_NOFOLLOW) == 0;
    int truncates = existed && (flags & O_TRUNC) != 0;
    char saved[64];
    if (truncates) save_before_truncation(&before, saved);
    fd = call(dirfd, path, flags, mode);
    int err = errno;
    if (fd >= 0) opened(fd, name, existed, truncates ? saved : NULL);
    errno = err;
  }
  pthread_mutex_unlock(&mu);
  return fd;
}

static int call_open(int dirfd, const char *path, int flags, mode_t mode) {
  (void)dirfd;
  REAL(open);
  return real_open(path, flags, mode);
}
static int call_open64(int dirfd, const char *path, int flags, mode_t mode) {
  (void)dirfd;
  REAL(open64);
  return real_open64(path, flags, mode);
}
static int call_openat(int dirfd, const char *path, int flags, mode_t mode) {
  REAL(openat);
  return real_openat(dirfd, path, flags, mode);
}
static int call_openat64(int dirfd, const char *path, int flags, mode_t mode) {
  REAL(openat64);
  return real_openat64(dirfd, path, flags, mode);
}

static mode_t mode_arg(int flags, va_list ap) {
  if ((flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE) return (mode_t)va_arg(ap, int);
  return 0;
}

int open(const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  return open_common(AT_FDCWD, path, flags, mode, call_open);
}

int open64(const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  return open_common(AT_FDCWD, path, flags, mode, call_open64);
}

int openat(int dirfd, const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  return open_common(dirfd, path, flags, mode, call_openat);
}

int openat64(int dirfd, const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  return open_common(dirfd, path, flags, mode, call_openat64);
}

int creat(const char *path, mode_t mode) {
  return open_common(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode, call_open);
}

int creat64(const char *path, mode_t mode) {
  return open_common(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode, call_open64);
}

/* fopen: glibc opens the file internally, so open() above never sees it. */
static FILE *fopen_common(const char *path, const char *mode, FILE *(*call)(const char *, const char *)) {
  char name[PATH_MAX];
  int kind = active ? classify(AT_FDCWD, path, name) : 0;
  int writes = mode != NULL && strpbrk(mode, "wa+") != NULL;
  if (kind == 0 || !writes) return call(path, mode);
  pthread_mutex_lock(&mu);
  FILE *f;
  if (kind != 1) {
    f = call(path, mode);
    int saved = errno;
    journal("X fopen for writing of %s in an unsupported form", path);
    errno = saved;
  } else {
    struct stat before;
    int existed = lstat(path, &before) == 0;
    int truncates = existed && mode[0] == 'w';
    char saved[64];
    if (truncates) save_before_truncation(&before, saved);
    f = call(path, mode);
    int err = errno;
    if (f != NULL) opened(fileno(f), name, existed, truncates ? saved : NULL);
    errno = err;
  }
  pthread_mutex_unlock(&mu);
  return f;
}

static FILE *call_fopen(const char *path, const char *mode) {
  REAL(fopen);
  return real_fopen(path, mode);
}
static FILE *call_fopen64(const char *path, const char *mode) {
  REAL(fopen64);
  return real_fopen64(path, mode);
}

FILE *fopen(const char *path, const char *mode) { return fopen_common(path, mode, call_fopen); }
FILE *fopen64(const char *path, const char *mode) { return fopen_common(path, mode, call_fopen64); }

/* fsync and fdatasync: a durability point for a tracked file or the directory itself. */
static int sync_common(int fd, int (*call)(int)) {
  struct stat st;
  if (!active || fstat(fd, &st) != 0) return call(fd);
  int is_dir = S_ISDIR(st.st_mode) && st.st_dev == watched_dev && st.st_ino == watched_ino;
  int is_file = S_ISREG(st.st_mode) && st.st_dev == watched_dev && tracked(st.st_ino);
  if (!is_dir && !is_file) {
    if (st.st_dev == watched_dev && fd_in_dir(fd)) {
      pthread_mutex_lock(&mu);
      journal("X fsync of a file in the directory that the shim never saw created (fd %d)", fd);
      pthread_mutex_unlock(&mu);
    }
    return call(fd);
  }
  pthread_mutex_lock(&mu);
  unsigned long long covers = lines;
  pthread_mutex_unlock(&mu);
  int r = call(fd);
  int saved = errno;
  if (r == 0) {
    pthread_mutex_lock(&mu);
    if (is_dir)
      journal("D %llu", covers);
    else
      journal("S %llu %lld %llu", (unsigned long long)st.st_ino, (long long)st.st_size, covers);
    pthread_mutex_unlock(&mu);
  }
  errno = saved;
  return r;
}

static int call_fsync(int fd) {
  REAL(fsync);
  return real_fsync(fd);
}
static int call_fdatasync(int fd) {
  REAL(fdatasync);
  return real_fdatasync(fd);
}

int fsync(int fd) { return sync_common(fd, call_fsync); }
int fdatasync(int fd) { return sync_common(fd, call_fdatasync); }

/* rename, renameat, renameat2 */
static int rename_common(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                         unsigned int flags) {
  REAL(renameat2);
  char oldname[PATH_MAX];
  char newname[PATH_MAX];
  int ko = active ? classify(olddirfd, oldpath, oldname) : 0;
  int kn = active ? classify(newdirfd, newpath, newname) : 0;
  if (ko == 0 && kn == 0) {
    if (flags == 0) {
      REAL(renameat);
      return real_renameat(olddirfd, oldpath, newdirfd, newpath);
    }
    return real_renameat2(olddirfd, oldpath, newdirfd, newpath, flags);
  }
  pthread_mutex_lock(&mu);
  struct stat st;
  int known = fstatat(olddirfd, oldpath, &st, AT_SYMLINK_NOFOLLOW) == 0;
  int r;
  if (flags == 0) {
    REAL(renameat);
    r = real_renameat(olddirfd, oldpath, newdirfd, newpath);
  } else {
    r = real_renameat2(olddirfd, oldpath, newdirfd, newpath, flags);
  }
  int saved = errno;
  if (r == 0) {
    if (ko != 1 || kn != 1 || flags != 0 || !known || !S_ISREG(st.st_mode) || !tracked(st.st_ino))
      journal("X rename of %s to %s is not one the model handles", oldpath, newpath);
    else
      journal("R %llu %s %s", (unsigned long long)st.st_ino, oldname, newname);
  }
  pthread_mutex_unlock(&mu);
  errno = saved;
  return r;
}

int rename(const char *oldpath, const char *newpath) {
  return rename_common(AT_FDCWD, oldpath, AT_FDCWD, newpath, 0);
}
int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
  return rename_common(olddirfd, oldpath, newdirfd, newpath, 0);
}
int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
              unsigned int flags) {
  return rename_common(olddirfd, oldpath, newdirfd, newpath, flags);
}

/* unlink, unlinkat, remove */
static int unlink_common(int dirfd, const char *path, int flags, int is_remove) {
  char name[PATH_MAX];
  int kind = active ? classify(dirfd, path, name) : 0;
  REAL(unlinkat);
  REAL(remove);
  if (kind == 0) return is_remove ? real_remove(path) : real_unlinkat(dirfd, path, flags);
  pthread_mutex_lock(&mu);
  struct stat st;
  int known = fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
  int r = is_remove ? real_remove(path) : real_unlinkat(dirfd, path, flags);
  int saved = errno;
  if (r == 0) {
    if (kind != 1 || !known || !S_ISREG(st.st_mode) || !tracked(st.st_ino))
      journal("X removal of %s is not one the model handles", path);
    else
      journal("U %llu %s", (unsigned long long)st.st_ino, name);
  }
  pthread_mutex_unlock(&mu);
  errno = saved;
  return r;
}

int unlink(const char *path) { return unlink_common(AT_FDCWD, path, 0, 0); }
int unlinkat(int dirfd, const char *path, int flags) { return unlink_common(dirfd, path, flags, 0); }
int remove(const char *path) { return unlink_common(AT_FDCWD, path, 0, 1); }

/* What the model does not represent: reported as X when it touches the directory. */
static void unsupported_path(int dirfd, const char *path, const char *what) {
  char name[PATH_MAX];
  if (!active || classify(dirfd, path, name) == 0) return;
  int saved = errno;
  pthread_mutex_lock(&mu);
  journal("X %s of %s", what, path);
  pthread_mutex_unlock(&mu);
  errno = saved;
}

static void unsupported_fd(int fd, const char *what) {
  struct stat st;
  if (!active) return;
  int saved = errno;
  if (tracked_fd(fd, &st)) {
    pthread_mutex_lock(&mu);
    journal("X %s of inode %llu", what, (unsigned long long)st.st_ino);
    pthread_mutex_unlock(&mu);
  }
  errno = saved;
}

static void unsupported(const char *what) {
  if (!active) return;
  int saved = errno;
  pthread_mutex_lock(&mu);
  journal("X %s", what);
  pthread_mutex_unlock(&mu);
  errno = saved;
}

void sync(void) {
  REAL(sync);
  unsupported("sync()");
  real_sync();
}

int syncfs(int fd) {
  REAL(syncfs);
  struct stat st;
  if (active && fstat(fd, &st) == 0 && st.st_dev == watched_dev) unsupported("syncfs()");
  return real_syncfs(fd);
}

int sync_file_range(int fd, off64_t offset, off64_t nbytes, unsigned int flags) {
  REAL(sync_file_range);
  unsupported_fd(fd, "sync_file_range");
  return real_sync_file_range(fd, offset, nbytes, flags);
}

int truncate(const char *path, off_t length) {
  REAL(truncate);
  unsupported_path(AT_FDCWD, path, "truncate");
  return real_truncate(path, length);
}

int truncate64(const char *path, off64_t length) {
  REAL(truncate64);
  unsupported_path(AT_FDCWD, path, "truncate");
  return real_truncate64(path, length);
}

int ftruncate(int fd, off_t length) {
  REAL(ftruncate);
  unsupported_fd(fd, "ftruncate");
  return real_ftruncate(fd, length);
}

int ftruncate64(int fd, off64_t length) {
  REAL(ftruncate64);
  unsupported_fd(fd, "ftruncate");
  return real_ftruncate64(fd, length);
}

int fallocate(int fd, int mode, off_t offset, off_t len) {
  REAL(fallocate);
  unsupported_fd(fd, "fallocate");
  return real_fallocate(fd, mode, offset, len);
}

int fallocate64(int fd, int mode, off64_t offset, off64_t len) {
  REAL(fallocate64);
  unsupported_fd(fd, "fallocate");
  return real_fallocate64(fd, mode, offset, len);
}

int posix_fallocate(int fd, off_t offset, off_t len) {
  REAL(posix_fallocate);
  unsupported_fd(fd, "posix_fallocate");
  return real_posix_fallocate(fd, offset, len);
}

int posix_fallocate64(int fd, off64_t offset, off64_t len) {
  REAL(posix_fallocate64);
  unsupported_fd(fd, "posix_fallocate");
  return real_posix_fallocate64(fd, offset, len);
}

int link(const char *oldpath, const char *newpath) {
  REAL(link);
  unsupported_path(AT_FDCWD, newpath, "link");
  return real_link(oldpath, newpath);
}

int linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags) {
  REAL(linkat);
  unsupported_path(newdirfd, newpath, "link");
  return real_linkat(olddirfd, oldpath, newdirfd, newpath, flags);
}

int symlink(const char *target, const char *linkpath) {
  REAL(symlink);
  unsupported_path(AT_FDCWD, linkpath, "symlink");
  return real_symlink(target, linkpath);
}

int symlinkat(const char *target, int newdirfd, const char *linkpath) {
  REAL(symlinkat);
  unsupported_path(newdirfd, linkpath, "symlink");
  return real_symlinkat(target, newdirfd, linkpath);
}

int mkdir(const char *path, mode_t mode) {
  REAL(mkdir);
  char name[PATH_MAX];
  /* LevelDB's CreateDir on the store directory itself is harmless (it already exists). */
  if (active && classify(AT_FDCWD, path, name) != 2) unsupported_path(AT_FDCWD, path, "mkdir");
  return real_mkdir(path, mode);
}

int mkdirat(int dirfd, const char *path, mode_t mode) {
  REAL(mkdirat);
  char name[PATH_MAX];
  if (active && classify(dirfd, path, name) != 2) unsupported_path(dirfd, path, "mkdir");
  return real_mkdirat(dirfd, path, mode);
}

int rmdir(const char *path) {
  REAL(rmdir);
  unsupported_path(AT_FDCWD, path, "rmdir");
  return real_rmdir(path);
}
