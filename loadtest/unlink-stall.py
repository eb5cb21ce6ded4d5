#!/usr/bin/env python3
"""How long a file's deletion holds another writer on the same file system.

A writer thread stands for the event loop's log: a 2000-byte pwrite into a
preallocated 64 MiB file every 0.5 ms, and an fdatasync every 500 writes.
After a second, a 1.4 GB file (written and fsynced first, as a committed
snapshot at 100M timers is) is deleted either at once (unlink) or as the
journal deletes it (steps: renamed, cut STEP MiB at a time from its end,
then unlinked; server/journal/remove.go). It prints how long the deletion
took and the writer's longest call while it ran.

    python3 loadtest/unlink-stall.py unlink DIR
    STEP=4 python3 loadtest/unlink-stall.py steps DIR

DIR must be on the file system to measure (default /tmp/unlink-stall); it
needs 1.5 GB free. docs/BENCHMARKS.md, "Deleting the old snapshot in steps".
"""
import os
import sys
import threading
import time

BIG_MIB = 1400


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "unlink"
    if mode not in ("unlink", "steps"):
        sys.exit("usage: unlink-stall.py unlink|steps [DIR]")
    d = sys.argv[2] if len(sys.argv) > 2 else "/tmp/unlink-stall"
    step = int(os.environ.get("STEP", "4")) << 20
    os.makedirs(d, exist_ok=True)
    big, seg = os.path.join(d, "big"), os.path.join(d, "seg")
    with open(big, "wb") as f:
        b = os.urandom(1 << 20)
        for _ in range(BIG_MIB):
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    fd = os.open(seg, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    os.posix_fallocate(fd, 0, 64 << 20)
    lat, stop = [], threading.Event()

    def writer():
        off, rec, n = 0, os.urandom(2000), 0
        while not stop.is_set():
            t = time.perf_counter()
            os.pwrite(fd, rec, off)
            off = (off + 2000) % (60 << 20)
            n += 1
            if n % 500 == 0:
                os.fdatasync(fd)
            lat.append((time.perf_counter() - t, t))
            time.sleep(0.0005)

    th = threading.Thread(target=writer)
    th.start()
    time.sleep(1)
    t0 = time.perf_counter()
    if mode == "unlink":
        os.unlink(big)
    else:
        gone = os.path.join(d, "removing-big")
        os.rename(big, gone)
        f = os.open(gone, os.O_WRONLY)
        size = os.fstat(f).st_size
        while size > 0:
            size = max(0, size - step)
            os.ftruncate(f, size)
        os.close(f)
        os.unlink(gone)
    t1 = time.perf_counter()
    time.sleep(1)
    stop.set()
    th.join()
    os.close(fd)
    os.unlink(seg)
    during = [l for l, t in lat if t0 - 0.05 <= t <= t1 + 0.05]
    print("%s%s: deletion took %.1f ms; the writer's calls meanwhile: %d, the longest %.2f ms; "
          "the longest of the run %.2f ms" % (
              mode, " (%d MiB steps)" % (step >> 20) if mode == "steps" else "",
              (t1 - t0) * 1e3, len(during), max(during or [0]) * 1e3, max(l for l, _ in lat) * 1e3))


if __name__ == "__main__":
    main()
