package io.tickwheel.client;

import java.util.List;

/**
 * ListPage is one page of a receiver's timers, in ascending tid order. {@code next} is
 * the {@code fromTid} of the next page, or 0 when there are no more: a short page is not
 * the last one unless {@code next} is 0.
 *
 * @param timers the page's timers
 * @param next the next page's first tid, or 0
 */
public record ListPage(List<Timer> timers, long next) {}
