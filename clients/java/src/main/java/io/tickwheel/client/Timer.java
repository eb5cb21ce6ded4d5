package io.tickwheel.client;

/**
 * Timer is one timer as {@code get} and {@code list} return it (docs/PROTOCOL.md "get").
 * uint64 fields are {@code long}s read as unsigned.
 *
 * @param receiver the receiver
 * @param tid the timer id
 * @param due the tick of its next firing (for a paused timer: the one a resume now gives)
 * @param remaining ticks until then
 * @param every ticks between firings (a cron timer: 0)
 * @param fired firings so far
 * @param repeat total firings, 0 = forever
 * @param paused whether it is paused
 * @param data its data, or null
 * @param schedule its cron schedule, or ""
 * @param zone its schedule's time zone, or "" (UTC)
 * @param missed its missed-firings policy
 * @param group its group, or 0 for none (docs/PROTOCOL.md "Bulk operations")
 */
public record Timer(long receiver, long tid, long due, long remaining, long every, long fired,
    long repeat, boolean paused, byte[] data, String schedule, String zone, Missed missed,
    long group) {}
