package io.tickwheel.client;

import java.util.List;

/**
 * GroupPage is one page of a group's timers (list_group), in ascending (receiver, tid)
 * order. {@code (nextReceiver, nextTid)} is the key of the first timer left out, where the
 * next page starts, or (0, 0) when there are no more: a short page is not the last one
 * unless both are 0.
 *
 * @param timers the page's timers
 * @param nextReceiver the next page's first receiver, or 0
 * @param nextTid the next page's first tid, or 0
 */
public record GroupPage(List<Timer> timers, long nextReceiver, long nextTid) {
  /** Whether there are more timers after this page. */
  public boolean hasMore() {
    return nextReceiver != 0 || nextTid != 0;
  }
}
